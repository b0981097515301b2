// QEMU command-line construction, accelerator choice and the guest's run script.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "vm/accel.h"
#include "vm/qemu.h"
#include "vm/vm.h"

using namespace wanlab::vm;

namespace {
QemuSpec example_spec() {
    QemuSpec s;
    s.qemu = "/usr/bin/qemu-system-x86_64";
    s.kernel = "/k/vmlinux";
    s.initrd = "/c/initramfs.cpio";
    s.append = "console=ttyS0 quiet";
    s.memory_mib = 512;
    s.cpus = 2;
    s.shares = {{"hostroot", "/", true}, {"wanlabout", "/data/a,b", false}};
    s.stdout_fd = 3;
    s.stderr_fd = 4;
    return s;
}
}  // namespace

TEST_CASE("qemu command line for TCG with shares and output ports", "[qemu]") {
    auto argv = qemu_argv(example_spec());
    std::vector<std::string> expected = {"/usr/bin/qemu-system-x86_64",
                                         "-nodefaults",
                                         "-no-user-config",
                                         "-display",
                                         "none",
                                         "-no-reboot",
                                         "-accel",
                                         "tcg,thread=multi",
                                         "-m",
                                         "512",
                                         "-smp",
                                         "2",
                                         "-kernel",
                                         "/k/vmlinux",
                                         "-initrd",
                                         "/c/initramfs.cpio",
                                         "-append",
                                         "console=ttyS0 quiet",
                                         "-chardev",
                                         "stdio,id=console,signal=off",
                                         "-serial",
                                         "chardev:console",
                                         "-fsdev",
                                         "local,id=fs0,path=/,security_model=none,readonly=on,multidevs=remap",
                                         "-device",
                                         "virtio-9p-pci,fsdev=fs0,mount_tag=hostroot",
                                         "-fsdev",
                                         "local,id=fs1,path=/data/a,,b,security_model=none,multidevs=remap",
                                         "-device",
                                         "virtio-9p-pci,fsdev=fs1,mount_tag=wanlabout",
                                         "-device",
                                         "virtio-serial-pci,id=wanlabser",
                                         "-chardev",
                                         "file,id=wanlabout,path=/proc/self/fd/3,append=on",
                                         "-device",
                                         "virtserialport,bus=wanlabser.0,chardev=wanlabout,name=wanlab.stdout",
                                         "-chardev",
                                         "file,id=wanlaberr,path=/proc/self/fd/4,append=on",
                                         "-device",
                                         "virtserialport,bus=wanlabser.0,chardev=wanlaberr,name=wanlab.stderr"};
    CHECK(argv == expected);
}

TEST_CASE("qemu command line for KVM uses -accel kvm and -cpu max, no ports when unset", "[qemu]") {
    auto spec = example_spec();
    spec.accel = Accel::kvm;
    spec.stdout_fd = spec.stderr_fd = -1;
    auto argv = qemu_argv(spec);
    CHECK(std::find(argv.begin(), argv.end(), "tcg,thread=multi") == argv.end());
    auto kvm = std::find(argv.begin(), argv.end(), "kvm");
    REQUIRE(kvm != argv.end());
    CHECK(*(kvm - 1) == "-accel");
    CHECK(*(kvm + 1) == "-cpu");
    CHECK(*(kvm + 2) == "max");
    CHECK(std::find(argv.begin(), argv.end(), "virtio-serial-pci,id=wanlabser") == argv.end());
}

TEST_CASE("kernel command line is quiet unless verbose and never reboots", "[qemu]") {
    CHECK(kernel_append().find(" quiet ") != std::string::npos);
    CHECK(kernel_append(true).find("quiet") == std::string::npos);
    CHECK(kernel_append().find("panic=-1") != std::string::npos);
    CHECK(kernel_append().rfind("console=ttyS0", 0) == 0);
}

TEST_CASE("accelerator: forced wins, no /dev/kvm means tcg, verdicts are cached", "[accel]") {
    int probes = 0;
    std::optional<bool> remembered;
    auto probe_ok = [&] {
        ++probes;
        return true;
    };
    auto probe_hang = [&] {
        ++probes;
        return false;
    };
    auto remember = [&](bool v) { remembered = v; };

    CHECK(choose_accel({Accel::tcg, true, true}, probe_ok, remember).accel == Accel::tcg);
    CHECK(choose_accel({std::nullopt, false, std::nullopt}, probe_ok, remember).accel == Accel::tcg);
    CHECK(probes == 0);
    CHECK(choose_accel({std::nullopt, true, false}, probe_ok, remember).accel == Accel::tcg);
    CHECK(choose_accel({std::nullopt, true, true}, probe_hang, remember).accel == Accel::kvm);
    CHECK(probes == 0);

    auto hung = choose_accel({std::nullopt, true, std::nullopt}, probe_hang, remember);
    CHECK(hung.accel == Accel::tcg);
    CHECK(hung.reason == "tcg: the KVM probe boot hung or failed");
    CHECK(probes == 1);
    CHECK(remembered == false);
}

TEST_CASE("accelerator names parse case-insensitively and reject others", "[accel]") {
    CHECK(parse_accel("KVM", "WANLAB_VM_ACCEL") == Accel::kvm);
    CHECK(parse_accel("tcg", "--accel") == Accel::tcg);
    CHECK_THROWS_WITH(parse_accel("hvf", "WANLAB_VM_ACCEL"), "WANLAB_VM_ACCEL: expected kvm or tcg, got 'hvf'");
}

TEST_CASE("guest script quotes every argument and keeps the working directory", "[script]") {
    CHECK(shell_quote("it's") == R"('it'\''s')");
    std::string s = guest_script({"sh", "-c", "exit 7"}, "/work/my dir");
    CHECK(s.find("cd '/work/my dir' 2>/dev/null || cd /\n") != std::string::npos);
    CHECK(s.find("\nexec 'sh' '-c' 'exit 7'\n") != std::string::npos);
    CHECK(s.find("export PATH=/usr/local/sbin:") != std::string::npos);
}
