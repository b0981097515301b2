#include "vm/initramfs.h"

#include <lzma.h>
#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "vm/cpio.h"
#include "vm/files.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

namespace {

// Bump when the archive layout changes in a way the inputs below do not capture.
constexpr std::string_view kFormatVersion =
    "wanlab-initramfs-3";  // 3: setsid, stty  // 2: every tcp_* congestion control

// Busybox applets /init uses, linked in /bin (modprobe in /sbin, where the kernel's
// request_module() looks for it).
constexpr std::string_view kApplets[] = {"sh",       "mount",    "umount", "mkdir", "insmod", "cat",    "echo",
                                         "chroot",   "poweroff", "dmesg",  "grep",  "sleep",  "sync",   "ifconfig",
                                         "hostname", "ls",       "uname",  "tail",  "chmod",  "setsid", "stty"};

constexpr std::string_view kInit = R"INIT(#!/bin/sh
# wanlab micro-VM /init: load modules, mount the host's files, run one command, report its
# exit status through the control share, power off. See vm/initramfs.h for the protocol.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/null >/dev/console 2>&1

fail() {
    echo "wanlab-init: failed: $*"
    poweroff -f
    sleep 10
}
p9="trans=virtio,version=9p2000.L,msize=262144"

kver=$(uname -r)
echo "wanlab-init: loading modules"
while read -r m; do
    insmod "/lib/modules/$kver/$m" || echo "wanlab-init: insmod $m failed"
done </etc/wanlab/modules

echo "wanlab-init: mounting the host's files"
mkdir -p /ctl /host
mount -t 9p -o "$p9" wanlabctl /ctl || fail "mounting the control share"
WANLAB_OUT=
. /ctl/vm.conf
mount -t 9p -o "$p9,ro,cache=loose" hostroot /host || fail "mounting the host's /"
mount -t proc proc /host/proc || fail "mounting /proc"
mount -t sysfs sysfs /host/sys || fail "mounting /sys"
mount -t devtmpfs devtmpfs /host/dev || fail "mounting /dev"
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t tmpfs tmpfs /host/dev/shm
# /tmp is writable but still shows the host's files (a checkout under /tmp must stay
# visible): an overlay with the host's /tmp below and a tmpfs on top; a plain tmpfs if
# the kernel has no overlayfs.
mkdir -p /ovl && mount -t tmpfs -o mode=0755 tmpfs /ovl && mkdir -p /ovl/up /ovl/work && chmod 1777 /ovl/up
mount -t overlay overlay -o lowerdir=/host/tmp,upperdir=/ovl/up,workdir=/ovl/work /host/tmp ||
    mount -t tmpfs -o mode=1777 tmpfs /host/tmp || fail "mounting /tmp"
mount -t tmpfs -o mode=0755 tmpfs /host/run || fail "mounting /run"
mount -t cgroup2 cgroup2 /host/sys/fs/cgroup 2>/dev/null
# The control share is the caller's folder (an ordinary user's for a run without root): not
# /run/wanlab, whose journals must be root's own.
mkdir -p /host/run/wanlab-vm /host/run/netns
mount -o bind /ctl /host/run/wanlab-vm || fail "binding the control share"
if [ -n "$WANLAB_OUT" ]; then
    mkdir -p "/host$WANLAB_OUT" 2>/dev/null
    mount -t 9p -o "$p9" wanlabout "/host$WANLAB_OUT" || fail "mounting $WANLAB_OUT"
fi
hostname wanlab-vm
ifconfig lo 127.0.0.1 up

out=/dev/console
err=/dev/console
tty=
for port in /sys/class/virtio-ports/*; do
    [ -e "$port/name" ] || continue
    case "$(cat "$port/name")" in
        wanlab.stdout) out=/dev/${port##*/} ;;
        wanlab.stderr) err=/dev/${port##*/} ;;
        wanlab.tty) tty=/dev/hvc0 ;;  # the only virtconsole
    esac
done
[ "$out" = /dev/console ] && mode=console || mode=ports
[ -n "$tty" ] && mode=terminal

echo "wanlab-init: start $mode"
if [ -n "$tty" ]; then
    # The user's terminal: the command's session and controlling tty (setsid -c), at the
    # size the user's terminal had. A child of this shell leads no group, so setsid runs in
    # it and this shell waits for the command's status.
    # fd 3 holds the tty open throughout: a tty that nobody has open forgets its size.
    exec 3<>"$tty"
    [ -n "${WANLAB_TTY_ROWS:-}" ] && stty -F "$tty" rows "$WANLAB_TTY_ROWS" cols "$WANLAB_TTY_COLS"
    setsid -c chroot /host /bin/sh /run/wanlab-vm/run.sh <"$tty" >"$tty" 2>&1 3>&-
    status=$?
    exec 3>&-
else
    chroot /host /bin/sh /run/wanlab-vm/run.sh </dev/null >"$out" 2>"$err"
    status=$?
fi
dmesg | grep -e "Out of memory" -e "oom-kill" -e "oom_reaper" >/ctl/oom
echo "$status" >/ctl/exit
[ -n "$WANLAB_OUT" ] && umount "/host$WANLAB_OUT"
sync
echo "wanlab-init: done $status"
poweroff -f
sleep 10
)INIT";

void add_busybox(CpioWriter& cpio, const std::string& busybox) {
    cpio.add_file("bin/busybox", busybox, 0755);
    for (auto applet : kApplets) cpio.add_symlink(fmt::format("bin/{}", applet), "busybox");
    cpio.add_symlink("sbin/modprobe", "../bin/busybox");
}

void add_skeleton(CpioWriter& cpio) {
    for (auto dir : {"dev", "proc", "sys", "tmp", "etc/wanlab", "lib/modules"}) cpio.add_directory(dir);
    cpio.add_char_device("dev/console", 0600, 5, 1);
    cpio.add_char_device("dev/null", 0666, 1, 3);
    cpio.add_file("init", kInit, 0755);
}

std::string plain_path(std::string_view path) {
    if (path.size() > 3 && path.substr(path.size() - 3) == ".xz") return std::string(path.substr(0, path.size() - 3));
    return std::string(path);
}

std::string load_module(const fs::path& file) {
    std::string data = read_file(file);
    std::string name = file.filename().string();
    if (name.ends_with(".ko.xz")) return xz_decompress(data, file.string());
    if (name.ends_with(".ko")) return data;
    throw Error(
        fmt::format("{}: compressed in a format wanlab cannot unpack (only .ko and "
                    ".ko.xz); pass a kernel with plain or xz modules",
                    file.string()));
}

// The modules.dep inside the archive: the included modules only, with plain .ko paths.
std::string rewrite_modules_dep(const ModuleIndex& index, const std::vector<std::string>& order) {
    std::string out;
    for (const auto& path : order) {
        auto deps = index.resolve({module_name(path)}).load_order;
        out += plain_path(path) + ":";
        for (auto it = deps.rbegin(); it != deps.rend(); ++it)
            if (*it != path) out += " " + plain_path(*it);
        out += "\n";
    }
    return out;
}

std::string cache_key(const InitramfsInputs& in, const std::vector<std::string>& files) {
    std::uint64_t h = fnv1a64(kFormatVersion);
    h = fnv1a64(kInit, h);
    h = fnv1a64(in.kernel.version, h);
    for (const auto& m : in.modules) h = fnv1a64(m + "\n", h);
    for (const auto& f : files) {
        struct stat st {};
        check_sys(::stat(f.c_str(), &st), fmt::format("stat {}", f));
        h = fnv1a64(fmt::format("{} {} {}\n", f, st.st_size, st.st_mtim.tv_sec), h);
    }
    return fmt::format("{:016x}", h);
}

}  // namespace

const std::vector<std::string>& default_modules() {
    static const std::vector<std::string> modules = {
        // reaching the host: PCI virtio, 9p, the output ports
        "virtio_pci", "9pnet_virtio", "9p", "virtio_console",
        // what the lab needs
        "sch_netem", "sch_tbf", "sch_htb", "sch_fq", "sch_fq_codel", "sch_cake", "sch_codel", "sch_pie", "sch_fq_pie",
        "sch_sfq", "sch_red", "sch_ingress", "sch_prio", "ifb", "veth", "act_mirred", "cls_u32", "cls_matchall",
        "tcp_bbr", "overlay"};
    return modules;
}

std::vector<std::string> guest_modules(const ModuleIndex& index, const std::vector<std::string>& base) {
    auto out = base;
    for (auto& name : index.loadable_with_prefix("tcp_"))
        if (name != "tcp_diag" && std::find(out.begin(), out.end(), name) == out.end())  // sock_diag's, not one
            out.push_back(std::move(name));
    return out;
}

std::string_view init_script() { return kInit; }

std::uint64_t fnv1a64(std::string_view data, std::uint64_t h) {
    for (unsigned char c : data) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

std::string xz_decompress(std::string_view data, std::string_view what) {
    lzma_stream strm = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&strm, UINT64_MAX, 0) != LZMA_OK)
        throw Error(fmt::format("{}: cannot start the xz decoder", what));
    std::string out;
    strm.next_in = reinterpret_cast<const std::uint8_t*>(data.data());
    strm.avail_in = data.size();
    lzma_ret ret = LZMA_OK;
    while (ret == LZMA_OK) {
        std::size_t used = out.size();
        out.resize(used + 256 * 1024);
        strm.next_out = reinterpret_cast<std::uint8_t*>(out.data() + used);
        strm.avail_out = out.size() - used;
        ret = lzma_code(&strm, LZMA_FINISH);
        out.resize(out.size() - strm.avail_out);
    }
    lzma_end(&strm);
    if (ret != LZMA_STREAM_END)
        throw Error(fmt::format("{}: corrupt xz data (liblzma error {})", what, static_cast<int>(ret)));
    return out;
}

std::string build_initramfs(const InitramfsInputs& in, std::vector<std::string>& missing) {
    const fs::path& mods = in.kernel.modules_dir;
    std::string builtin_text;
    if (fs::exists(mods / "modules.builtin")) builtin_text = read_file(mods / "modules.builtin");
    ModuleIndex index = ModuleIndex::parse(read_file(mods / "modules.dep"), builtin_text);
    auto resolution = index.resolve(guest_modules(index, in.modules));
    missing = resolution.missing;

    CpioWriter cpio;
    add_skeleton(cpio);
    const std::string busybox = read_file(in.busybox);
    add_busybox(cpio, busybox);
    const std::string root = "lib/modules/" + in.kernel.version + "/";
    std::string order;
    std::vector<std::string> blobs;  // keeps module bytes alive until finish()
    blobs.reserve(resolution.load_order.size());
    for (const auto& path : resolution.load_order) {
        blobs.push_back(load_module(mods / path));
        cpio.add_file(root + plain_path(path), blobs.back(), 0644);
        order += plain_path(path) + "\n";
    }
    const std::string dep = rewrite_modules_dep(index, resolution.load_order);
    cpio.add_file(root + "modules.dep", dep);
    cpio.add_file(root + "modules.builtin", builtin_text);
    cpio.add_file("etc/wanlab/modules", order);
    return cpio.finish();
}

Initramfs ensure_initramfs(const InitramfsInputs& in, const fs::path& cache_dir) {
    const fs::path& mods = in.kernel.modules_dir;
    ModuleIndex index =
        ModuleIndex::parse(read_file(mods / "modules.dep"),
                           fs::exists(mods / "modules.builtin") ? read_file(mods / "modules.builtin") : "");
    auto resolution = index.resolve(in.modules);
    std::vector<std::string> files = {in.busybox.string(), (mods / "modules.dep").string()};
    for (const auto& p : resolution.load_order) files.push_back((mods / p).string());

    Initramfs result;
    result.path = cache_dir / fmt::format("initramfs-{}-{}.cpio", in.kernel.version, cache_key(in, files));
    result.missing_modules = resolution.missing;
    if (fs::exists(result.path)) {
        result.from_cache = true;
        return result;
    }
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (ec) throw Error(fmt::format("creating {}: {}", cache_dir.string(), ec.message()));
    std::vector<std::string> missing;
    write_file_atomic(result.path, build_initramfs(in, missing));
    prune_cache(cache_dir, fmt::format("initramfs-{}-", in.kernel.version), result.path);
    return result;
}

}  // namespace wanlab::vm
