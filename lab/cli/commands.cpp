#include "lab/cli/command.h"

namespace wanlab::cli {

namespace {
constexpr Command kCommands[] = {
    {"validate", "Check an experiment file without touching the machine", &setup_validate},
    {"plan", "Show the trials an experiment expands to, with equivalent tc/sysctl commands", &setup_plan},
#ifdef WANLAB_HAVE_VM
    {"vm", "Run commands in a throwaway micro-VM with a stock kernel (real netem anywhere)", &setup_vm},
#endif
};
}  // namespace

std::span<const Command> commands() { return kCommands; }

}  // namespace wanlab::cli
