#include "vm/accel.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "vm/files.h"
#include "vm/initramfs.h"

namespace wanlab::vm {

namespace fs = std::filesystem;

AccelChoice choose_accel(const AccelInputs& in, const std::function<bool()>& probe,
                         const std::function<void(bool)>& remember) {
    if (in.forced) return {*in.forced, fmt::format("{}: forced", accel_name(*in.forced))};
    if (!in.kvm_device_usable) return {Accel::tcg, "tcg: /dev/kvm is absent or not usable"};
    if (in.kvm_verdict)
        return *in.kvm_verdict ? AccelChoice{Accel::kvm, "kvm: a probe boot succeeded (cached verdict)"}
                               : AccelChoice{Accel::tcg, "tcg: a KVM probe boot hung (cached verdict)"};
    const bool works = probe();
    remember(works);
    return works ? AccelChoice{Accel::kvm, "kvm: the probe boot succeeded"}
                 : AccelChoice{Accel::tcg, "tcg: the KVM probe boot hung or failed"};
}

Accel parse_accel(std::string_view text, std::string_view source) {
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "kvm") return Accel::kvm;
    if (lower == "tcg") return Accel::tcg;
    throw InputError(fmt::format("{}: expected kvm or tcg, got '{}'", source, text));
}

bool kvm_device_usable() {
    Fd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
    if (!fd.valid()) return false;
    return ::ioctl(fd.get(), KVM_GET_API_VERSION, 0) == KVM_API_VERSION;
}

fs::path kvm_verdict_file(const fs::path& cache_dir, const fs::path& qemu, std::string_view kernel_version) {
    struct utsname uts {};
    ::uname(&uts);
    struct stat st {};
    ::stat(qemu.c_str(), &st);
    std::string key = fmt::format("{}|{}|{}|{}|{}|{}", uts.release, uts.version, qemu.string(), st.st_size,
                                  st.st_mtim.tv_sec, kernel_version);
    return cache_dir / fmt::format("kvm-verdict-{:016x}", fnv1a64(key));
}

std::optional<bool> read_kvm_verdict(const fs::path& file) {
    std::error_code ec;
    if (!fs::exists(file, ec)) return std::nullopt;
    std::string text = read_file(file);
    if (text.starts_with("works")) return true;
    if (text.starts_with("hangs")) return false;
    return std::nullopt;
}

void write_kvm_verdict(const fs::path& file, bool works) {
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    write_file_atomic(file, works ? "works\n" : "hangs\n");
}

}  // namespace wanlab::vm
