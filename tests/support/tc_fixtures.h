// Reads a file of bytes iproute2's tc sent (tests/netem/fixtures/*.txt, written by
// capture.py): `ARGS<TAB>HEX` lines, '#' comments. Returns ARGS -> bytes.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace wanlab::testing {

inline std::map<std::string, std::vector<std::uint8_t>> tc_fixtures(const std::string& file) {
    std::map<std::string, std::vector<std::uint8_t>> out;
    std::ifstream in(std::string(WANLAB_NETEM_FIXTURES) + "/" + file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        auto tab = line.find('\t');
        std::vector<std::uint8_t> bytes;
        for (std::size_t i = tab + 1; i + 1 < line.size(); i += 2)
            bytes.push_back(static_cast<std::uint8_t>(std::stoi(line.substr(i, 2), nullptr, 16)));
        out[line.substr(0, tab)] = bytes;
    }
    return out;
}

}  // namespace wanlab::testing
