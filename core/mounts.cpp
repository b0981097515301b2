#include "core/mounts.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/sys.h"
#include "core/text.h"

namespace wanlab::sys {
namespace {

// A mount point's space, tab, newline and backslash are octal escapes in mountinfo.
std::string unescape(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
            out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
            i += 3;
        } else {
            out += s[i];
        }
    return out;
}

bool inside(const std::string& path, const std::string& point) {
    if (point == "/") return true;
    return path == point || (path.starts_with(point) && path[point.size()] == '/');
}

}  // namespace

std::string mount_type(const std::string& mountinfo, const std::filesystem::path& dir) {
    // One line per mount: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE ..."
    // (proc(5)). The last matching line wins: a later mount over the same point hides the
    // earlier ones.
    std::string path = dir.lexically_normal().string();
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    std::string type;
    std::size_t best = 0;
    std::istringstream lines(mountinfo);
    for (std::string line; std::getline(lines, line);) {
        auto w = text::words(line);
        auto dash = std::find(w.begin(), w.end(), "-");
        if (w.size() < 5 || dash == w.end() || dash + 1 == w.end()) continue;
        auto point = unescape(w[4]);
        if (!inside(path, point) || point.size() < best) continue;
        best = point.size();
        type = *(dash + 1);
    }
    return type;
}

bool on_network_fs(const std::filesystem::path& dir) {
    // By the mount's type, not statfs(): a 9p mount reports the f_type of the host's file
    // system behind it (ext4 in the micro-VM), so statfs cannot tell it from a local disk.
    std::error_code ec;
    auto real = std::filesystem::weakly_canonical(std::filesystem::absolute(dir, ec), ec);
    std::string info;
    try {
        info = read_file("/proc/self/mountinfo", 4 << 20, "reading the mounts");
    } catch (const Error&) {
        return false;
    }
    auto type = mount_type(info, ec ? dir : real);
    static const std::set<std::string> kNetwork = {"9p",    "nfs",  "nfs4",     "cifs", "smb3",
                                                   "smbfs", "ceph", "virtiofs", "afs"};
    return kNetwork.count(type) > 0 || type == "fuse" || type.starts_with("fuse.");
}

}  // namespace wanlab::sys
