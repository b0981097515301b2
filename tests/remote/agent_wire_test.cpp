// The agent's wire is a trust boundary (issue 40): a hostile line gets an error that names the
// field, never a crash, and nothing on the machine changes. The agent runs in a child process
// (its signal handling is the process's), talked to over two pipes as ssh would.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "remote/agent.h"
#include "remote/protocol.h"
#include "tests/support/load_helper.h"

using namespace wanlab;
using Catch::Matchers::Contains;
using wanlab::testing::load;

namespace {

/// `wanlab agent` in a child process, on pipes; its journal directory a fresh empty folder.
class Agent {
public:
    Agent() {
        // A write after the agent has ended (as the 16 MiB test does) is an EPIPE here, not a
        // SIGPIPE that ends the test binary.
        old_pipe_ = std::signal(SIGPIPE, SIG_IGN);
        char name[] = "/tmp/wanlab-agent-wire-XXXXXX";
        REQUIRE(::mkdtemp(name));
        dir_ = name;
        int to[2], from[2];
        REQUIRE(::pipe2(to, O_CLOEXEC) == 0);
        REQUIRE(::pipe2(from, O_CLOEXEC) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::close(to[1]);
            ::close(from[0]);
            int rc = 2;
            try {
                rc = remote::serve(to[0], from[1], remote::AgentOptions{dir_});
            } catch (...) {
                rc = 3;
            }
            ::_exit(rc);
        }
        ::close(to[0]);
        ::close(from[1]);
        to_ = to[1];
        from_ = ::fdopen(from[0], "r");
        REQUIRE(from_);
    }
    ~Agent() {
        if (to_ >= 0) ::close(to_);
        if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
        if (from_) std::fclose(from_);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        std::signal(SIGPIPE, old_pipe_);
    }

    void send(const std::string& line) {
        std::string all = line + "\n";
        for (std::size_t off = 0; off < all.size();) {
            ssize_t n = ::write(to_, all.data() + off, all.size() - off);
            if (n <= 0) return;  // the agent has gone: the next read says so
            off += static_cast<std::size_t>(n);
        }
    }
    /// The next line the agent wrote, parsed; null at EOF.
    nlohmann::json answer() {
        std::string line;
        for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) line += static_cast<char>(c);
        if (line.empty()) return nullptr;
        return nlohmann::json::parse(line);
    }
    nlohmann::json ask(const std::string& line) {
        send(line);
        return answer();
    }
    /// Closes its input and returns its exit status (-1 if it did not exit normally).
    int finish() {
        ::close(to_);
        to_ = -1;
        int st = 0;
        ::waitpid(pid_, &st, 0);
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    bool dir_empty() const { return std::filesystem::is_empty(dir_); }

private:
    std::filesystem::path dir_;
    pid_t pid_ = -1;
    int to_ = -1;
    FILE* from_ = nullptr;
    void (*old_pipe_)(int) = SIG_DFL;
};

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("the agent answers deeply nested JSON with an error and goes on serving", "[remote][agent][security]") {
    Agent a;
    CHECK(a.answer()["agent"] == "wanlab");  // its hello
    auto deep = a.ask(nested(200'000));
    CHECK(deep["ok"] == false);
    CHECK_THAT(deep["error"].get<std::string>(), Contains("nested at most 64 levels"));
    auto deep_id = a.ask(R"({"op":"ping","id":)" + nested(100'000) + "}");
    CHECK(deep_id["ok"] == false);
    CHECK(deep_id["id"].is_null());
    // A long id is not echoed back; a short one is.
    CHECK(a.ask(R"({"op":"ping","id":")" + std::string(1000, 'x') + "\"}")["id"].is_null());
    CHECK(a.ask(R"({"op":"ping","id":7})")["id"] == 7);
    auto op = a.ask(R"({"op":5})");
    CHECK(op["ok"] == false);
    CHECK_THAT(op["error"].get<std::string>(), Contains("a string `op`"));
    CHECK(a.ask(R"({"op":"ping"})")["ok"] == true);
    CHECK(a.finish() == 0);
}

TEST_CASE("begin checks every field before anything is made: keys, run id, lease, deadline",
          "[remote][agent][security]") {
    Agent a;
    a.answer();
    // A "key" that would make a lock file's path leave the journal directory.
    auto keys = a.ask(R"({"op":"begin","run":"r1","global_keys":["net.core/../../../etc/x"]})");
    CHECK(keys["ok"] == false);
    CHECK_THAT(keys["error"].get<std::string>(), Contains("begin: `global_keys` holds \"net.core/../../../etc/x\", "
                                                          "which is not a sysctl key"));
    auto run = a.ask(R"({"op":"begin","run":"../r1"})");
    CHECK_THAT(run["error"].get<std::string>(), Contains("begin: `run` must be a run id"));
    // 49.7 days of lease wrapped to under a second once; now it is refused.
    auto lease = a.ask(R"({"op":"begin","run":"r1","lease_s":4294967})");
    CHECK_THAT(lease["error"].get<std::string>(), Contains("begin: `lease_s` must be a whole number from 0 to 3600"));
    auto deadline = a.ask(R"({"op":"begin","run":"r1","deadline_s":"soon"})");
    CHECK_THAT(deadline["error"].get<std::string>(), Contains("begin: `deadline_s` must be a whole number"));
    auto restore = a.ask(R"({"op":"begin","run":"r1","restore":"yes"})");
    CHECK_THAT(restore["error"].get<std::string>(), Contains("begin: `restore` must be true or false"));
    CHECK(a.dir_empty());  // no lock, no journal
    CHECK(a.finish() == 0);
}

TEST_CASE("a request line over 16 MiB is refused in words before the agent ends", "[remote][agent][security]") {
    Agent a;
    a.answer();
    a.send(std::string(17u << 20, 'x'));
    auto said = a.answer();
    REQUIRE(said.is_object());
    CHECK(said["ok"] == false);
    CHECK_THAT(said["error"].get<std::string>(), Contains("longer than 16 MiB"));
    CHECK(a.finish() == 1);
}

TEST_CASE("a service name that is a path never reaches the agent's folders", "[remote][agent][security]") {
    services::ServiceSpec s;
    s.name = "web";
    s.host = "server";
    s.command = {"nginx"};
    auto j = remote::service_json(s);
    j["name"] = "../../etc/cron.d/x";
    CHECK_THROWS_WITH(remote::service_of(j), Contains("must be 1-64 letters, digits, `-` or `_`"));
}

TEST_CASE("a hello with fields of the wrong type is refused naming the machine", "[remote][agent][security]") {
    auto h = remote::hello("lab-2", "6.1.0", "x86_64");
    h["protocol"] = "1";
    CHECK_THAT(remote::hello_problem(h, "server", "wanlab"),
               Contains("server: `wanlab` there is wanlab") && Contains("(agent protocol 1)"));
    h = remote::hello("lab-2", "6.1.0", "x86_64");
    h["version"] = nlohmann::json::array({1, 2});
    h["protocol"] = "\x1b[2J";
    auto said = remote::hello_problem(h, "server", "wanlab");
    CHECK_THAT(said, Contains("there is wanlab [1,2]") && Contains("\\x1b[2J"));
}

TEST_CASE("every op names the field it refuses, and a key is never a path", "[remote][agent][security]") {
    Agent a;
    a.answer();
    auto path = a.ask(R"({"op":"read","keys":["net/../../../etc/shadow"]})");
    CHECK(path["ok"] == false);
    CHECK_THAT(path["error"].get<std::string>(), Contains("read: `keys` holds \"net/../../../etc/shadow\", which is "
                                                          "not a sysctl key"));
    CHECK_THAT(a.ask(R"({"op":"read","keys":"net.core.rmem_max"})")["error"].get<std::string>(),
               Contains("read: `keys` is not of the type this field takes"));
    CHECK(a.ask(R"({"op":"read","keys":["net.core.rmem_max"]})")["ok"] == true);
    REQUIRE(a.ask(R"({"op":"begin","run":"r1"})")["ok"] == true);
    auto set = a.ask(R"({"op":"sysctl","set":[["net.core/../../x","1"]]})");
    CHECK_THAT(set["error"].get<std::string>(), Contains("sysctl: `set` holds [\"net.core/../../x\",\"1\"], which is "
                                                         "not a [sysctl key, value] pair"));
    auto dev = a.ask(R"({"op":"link","dev":5,"target":"198.18.0.2"})");
    CHECK_THAT(dev["error"].get<std::string>(), Contains("link: `dev` must be a string"));
    auto port = a.ask(R"({"op":"probe_serve","probe":{"name":"p","kind":"rtt","options":{}},"port":70000})");
    CHECK_THAT(port["error"].get<std::string>(), Contains("a probe as the controller sent it: option `"));
    auto trial = a.ask(R"({"op":"service_start","service":{},"values":{},"trial":"t"})");
    CHECK_THAT(trial["error"].get<std::string>(), Contains("a service as the controller sent it: `name` is missing"));
    CHECK(a.ask(R"({"op":"end"})")["ok"] == true);
    CHECK(a.finish() == 0);
}

TEST_CASE("a probe from the wire is checked as the file would be: kind, options, types and ranges",
          "[remote][agent][security]") {
    // A spec the loader made crosses and comes back whole.
    auto l = load("name = \"x\"\n[[probe]]\nname = \"bulk\"\nkind = \"udp\"\nrate = \"10mbit\"\n");
    INFO(l.messages);
    REQUIRE(l.exp);
    const auto& p = l.exp->trials.front().probes.front();
    auto good = remote::probe_json(p);
    CHECK(remote::probe_of(good).options == p.options);
    auto with = [&](const char* option, nlohmann::json v) {
        auto j = good;
        j["options"][option] = std::move(v);
        return j;
    };
    CHECK_THROWS_WITH(remote::probe_of(with("rate", 9'200'000'000'000'000'000.0)), Contains("option `rate`"));
    CHECK_THROWS_WITH(remote::probe_of(with("rate", -5)), Contains("option `rate`"));
    CHECK_THROWS_WITH(remote::probe_of(with("duration", std::int64_t{200} * 86400 * 1'000'000'000)),
                      Contains("option `duration` must be a duration from"));
    CHECK_THROWS_WITH(remote::probe_of(with("size", 70000)), Contains("option `size` must be 24-65507 bytes"));
    CHECK_THROWS_WITH(remote::probe_of(with("exfiltrate", 1)),
                      Contains("option `exfiltrate` is not one of kind udp's"));
    auto j = good;
    j["kind"] = "rm";
    CHECK_THROWS_WITH(remote::probe_of(j), Contains("`kind` \"rm\" is not a probe kind"));
    j = good;
    j["options"].erase("rate");
    CHECK_THROWS_WITH(remote::probe_of(j), Contains("option `rate` is missing"));
    nlohmann::json flow = {{"local", "198.18.0.1"}, {"local_port", 70000}, {"peer", "198.18.0.2"}, {"peer_port", 22}};
    CHECK_THROWS_WITH(remote::flow_of(flow), Contains("`local_port` must be a whole number from 0 to 65535"));
}
