# The Debian package: `scripts/package` (CPack's DEB generator) from a build of the `wanlab`
# target. It holds what `cmake --install` puts in place, under /usr: the binary (stripped),
# the profiles and examples (share/wanlab), the man page and the shell completions.
#
# Depends: the shared libraries the binary links (libnl-3, libnl-route-3, sqlite, pcap,
# pcre2, fmt, boost_filesystem, found by dpkg-shlibdeps) and iproute2 (`ip netns` names the
# lab's namespaces, which `ip netns exec` users expect to see).
# Recommends: what the micro-VM needs on a kernel without sch_netem (QEMU, busybox-static
# for its init, cpio for its initramfs, kmod for the stock kernel's modules); apt installs
# them by default, and wanlab runs without them on a kernel with netem.
# Suggests: the external programs the probes and examples can drive (iperf3, wrk, hping3,
# nginx), ping, ssh for experiments across machines, sqlite3 to read results by hand.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME wanlab)
set(CPACK_PACKAGE_CONTACT "wanlab developers <wanlab@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "network tuning and emulation lab: netem, sysctls and probes, swept and explained")
set(CPACK_PACKAGE_DESCRIPTION
    "wanlab reads a TOML experiment file naming link conditions to emulate (netem through netlink), kernel settings to try and probes to run; it runs every probe under every configuration, restores the machine exactly, and reports before/after results with the reasons behind them.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "iproute2")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "qemu-system-x86, busybox-static, cpio, kmod")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "iperf3, wrk, hping3, nginx, iputils-ping, openssh-client, sqlite3")
# `cpack` installs what is built, without building every target first (the tests): the
# package script builds the targets that install.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
include(CPack)
