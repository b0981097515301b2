// A folder of its own under /tmp for one test, removed with everything in it at the end.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace wanlab::testing {

struct TempFolder {
    std::filesystem::path dir;
    explicit TempFolder(const std::string& prefix = "wanlab-test") {
        std::string t = "/tmp/" + prefix + "-XXXXXX";
        dir = ::mkdtemp(t.data());
    }
    ~TempFolder() { std::filesystem::remove_all(dir); }
    TempFolder(const TempFolder&) = delete;
    TempFolder& operator=(const TempFolder&) = delete;
    /// Writes `text` to the file `name` in the folder; its path.
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(dir / name) << text;
        return (dir / name).string();
    }
};

}  // namespace wanlab::testing
