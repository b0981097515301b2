// The SSH guard against a real kernel (root): a session on a port other than 22, held by a
// process named sshd, whose local address sits on a bridge stacked on the device to impair.
#include "tests/support/root_helper.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "core/sys.h"

using namespace wanlab::root_testing;

namespace {

/// Two namespaces of the test's own: A holds veth end `va` as a port of bridge `brt`, whose
/// address is 198.18.200.1/24; B holds the peer `vb`, 198.18.200.2/24. Deleted on destruction.
struct BridgedPair {
    std::string a = fmt::format("wlt-ssh-{}-a", ::getpid()), b = fmt::format("wlt-ssh-{}-b", ::getpid());
    BridgedPair() {
        int status = 0;
        sh(fmt::format("ip netns add {0} && ip netns add {1} && ip -n {0} link set lo up && "
                       "ip -n {0} link add va type veth peer name vb netns {1} && "
                       "ip -n {0} link add brt type bridge && ip -n {0} link set va master brt && "
                       "ip -n {0} addr add 198.18.200.1/24 dev brt && ip -n {0} link set va up && "
                       "ip -n {0} link set brt up && ip -n {1} addr add 198.18.200.2/24 dev vb && "
                       "ip -n {1} link set vb up",
                       a, b),
           &status);
        REQUIRE(status == 0);
    }
    ~BridgedPair() {
        sh(fmt::format("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null", a, b));
        std::error_code ec;  // `link apply` leaves its device lock file (by design); this one is ours
        std::filesystem::remove(fmt::format("/run/wanlab/dev-{}--va.lock", a), ec);
    }
};

/// A child process named "sshd" listening on `address`:2222 in namespace `ns`, and one
/// established connection to it from namespace `client_ns`: an SSH session as the guard sees
/// it. The child is killed on destruction.
class FakeSshd {
public:
    FakeSshd(const std::string& ns, const std::string& client_ns, const char* address = "198.18.200.1") {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::prctl(PR_SET_NAME, "sshd");
            int nsfd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY);
            int s = -1;
            sockaddr_in at{};
            at.sin_family = AF_INET;
            at.sin_port = htons(2222);
            ::inet_pton(AF_INET, address, &at.sin_addr);
            if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0 || (s = ::socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
                ::bind(s, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(s, 4) != 0)
                ::_exit(1);
            (void)!::write(ready[1], "x", 1);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        ::close(ready[0]);
        {
            wanlab::sys::NetnsScope in(client_ns);
            client_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        }
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(2222);
        ::inet_pton(AF_INET, address, &to.sin_addr);
        REQUIRE(eventually([&] { return ::connect(client_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0; },
                           std::chrono::seconds(5)));
    }
    ~FakeSshd() {
        ::close(client_);
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    FakeSshd(const FakeSshd&) = delete;
    FakeSshd& operator=(const FakeSshd&) = delete;

private:
    pid_t pid_ = -1;
    int client_ = -1;
};

}  // namespace

TEST_CASE("link apply refuses a bridge port whose bridge carries a session on sshd's own port", "[root]") {
    if (skip_unless_root()) return;
    BridgedPair pair;
    int status = 0;
    {
        FakeSshd sshd(pair.a, pair.b);
        std::string out =
            sh(fmt::format("{} link apply --netns {} --dev va --delay 10ms 2>&1", WANLAB_BINARY, pair.a), &status);
        INFO(out);
        CHECK(status == 2);
        CHECK_THAT(out, Catch::Contains("va carries the SSH session from 198.18.200.2 (to 198.18.200.1 port 2222) "
                                        "through brt, which is stacked on it"));
        CHECK(sh(fmt::format("tc -n {} qdisc show dev va", pair.a)).find("netem") == std::string::npos);
    }
    // The same device with no session on an sshd port: the guard lets it through to the change
    // (which this kernel may refuse for want of sch_netem, but not with the guard's message).
    std::string out =
        sh(fmt::format("{} link apply --netns {} --dev va --delay 10ms 2>&1; {} link clear --netns {} --dev va",
                       WANLAB_BINARY, pair.a, WANLAB_BINARY, pair.a),
           &status);
    INFO(out);
    CHECK_THAT(out, !Catch::Contains("carries the SSH session"));
}

TEST_CASE("host mode refuses a sysctl that could cut a session on sshd's port before changing anything", "[root]") {
    if (skip_unless_root()) return;
    // wanlab runs inside namespace H, which stands in for "this machine": d0 198.18.201.1/24
    // there, its peer 198.18.201.2/24 in namespace P, where the session comes from.
    std::string h = fmt::format("wlt-sys-{}-h", ::getpid()), p = fmt::format("wlt-sys-{}-p", ::getpid());
    struct Gone {
        std::string h, p;
        ~Gone() { sh(fmt::format("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null", h, p)); }
    } gone{h, p};
    int status = 0;
    sh(fmt::format("ip netns add {0} && ip netns add {1} && ip -n {0} link set lo up && "
                   "ip -n {0} link add d0 type veth peer name d1 netns {1} && "
                   "ip -n {0} addr add 198.18.201.1/24 dev d0 && ip -n {0} link set d0 up && "
                   "ip -n {1} addr add 198.18.201.2/24 dev d1 && ip -n {1} link set d1 up",
                   h, p),
       &status);
    REQUIRE(status == 0);
    std::string now = sh(fmt::format("ip netns exec {} cat /proc/sys/net/ipv4/conf/all/rp_filter", h));
    std::string value = now.rfind("0", 0) == 0 ? "1" : now.rfind("1", 0) == 0 ? "2" : "1";
    ExperimentFile file;  // only for a temporary path
    std::ofstream(file.path) << fmt::format(R"(name = "guard"
[lab]
mode = "host"
dev = "d0"
target = "198.18.201.9"
[sysctl.host]
"net.ipv4.conf.all.rp_filter" = {}
[[probe]]
name = "p"
kind = "rtt"
method = "icmp"
)",
                                            value);
    FakeSshd sshd(h, p, "198.18.201.1");
    // Unguarded, the lab would come up and wait: the timeout's SIGINT then takes it down.
    std::string out =
        sh(fmt::format("ip netns exec {} env -u SSH_CONNECTION timeout -s INT 30 {} lab up {} --run gsy 2>&1", h,
                       WANLAB_BINARY, file.path.string()),
           &status);
    INFO(out);
    CHECK(status == 2);
    CHECK_THAT(out,
               Catch::Contains(fmt::format("host mode sets net.ipv4.conf.all.rp_filter = \"{}\"", value)) &&
                   Catch::Contains("could cut the SSH session from 198.18.201.2 (to 198.18.201.1 port 2222 on d0)"));
    CHECK(sh(fmt::format("ip netns exec {} cat /proc/sys/net/ipv4/conf/all/rp_filter", h)) == now);
    CHECK_FALSE(std::filesystem::exists("/run/wanlab/gsy.journal"));
}
