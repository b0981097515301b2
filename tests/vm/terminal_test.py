#!/usr/bin/env python3
"""vm:terminal: a terminal carried into the micro-VM, driven as a user would through a pty.

  1. `wanlab vm run -t -- sh -i`: the guest shell's stdin is a terminal of the pty's size, a
     typed Ctrl-C interrupts the command it runs (status 130) and not the VM, `exit 7` is
     wanlab's exit status, and the pty's settings are as they were afterwards;
  2. `wanlab shell FILE` without a command on a kernel without netem: an interactive shell in
     the lab inside the micro-VM, whose pings cross the emulated 100 ms path;
  3. `wanlab lab up FILE` there: the same, said so, and exit 0 takes the lab down.
Fails (never skips) when the VM cannot boot. Usage: terminal_test.py WANLAB WORK_DIR
"""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import sys
import termios
import time

WANLAB, WORK = sys.argv[1], sys.argv[2]
ROWS, COLS = 37, 111
failures = []


def check(ok, what):
    print(("ok - " if ok else "not ok - ") + what, flush=True)
    if not ok:
        failures.append(what)


class Session:
    """A command on the slave side of a new pty of ROWS x COLS; this process types into it."""

    def __init__(self, argv):
        self.out = b""
        pid, fd = pty.fork()
        if pid == 0:
            # The terminal's size before wanlab reads it.
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            os.environ["SHELL"] = "/bin/sh"  # `wanlab shell`'s shell: dash, whose prompt is PROMPT
            os.execv(argv[0], argv)
        self.pid, self.fd = pid, fd
        self.before = termios.tcgetattr(fd)

    def read_until(self, pattern, timeout):
        """Reads until `pattern` (a regex on the whole output) matches; the match or None."""
        end = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.out.decode(errors="replace"))
            if m:
                return m
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the slave side closed
                    return re.search(pattern, self.out.decode(errors="replace"))
                if not chunk:
                    return None
                self.out += chunk

    def type(self, text):
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def wait(self, timeout):
        """The command's exit status (or -1 if it outlived `timeout`); reads what it still says."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.read_until(r"\Z(?!x)", 0.2)
                return os.waitstatus_to_exitcode(status)
            self.read_until(r"\Z(?!x)", 0.2)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return -1

    def settings_restored(self):
        """The pty's line settings (echo, canonical input, signals) as before the command."""
        after = termios.tcgetattr(self.fd)
        return after[3] == self.before[3] and after[0] == self.before[0] and after[1] == self.before[1]

    def tail(self):
        return self.out.decode(errors="replace")[-1500:]


BOOT = 150  # seconds: a TCG boot is ~5 s, on a loaded host much more
# The guest shell's prompt (dash, as root): typing starts once it shows, as a user's would.
# What is typed before the guest has opened its terminal is lost: QEMU drops input for a
# console no one has open (docs/microvm.md).
PROMPT = r"# $"

# 1. vm run -t
s = Session([WANLAB, "vm", "run", "-t", "--", "sh", "-i"])
prompt = s.read_until(PROMPT, BOOT)
check(prompt is not None, "vm run -t: the guest shell's prompt shows" + ("" if prompt else ": " + s.tail()))
s.type("echo MARK-$((6*7)); stty size; [ -t 0 ] && echo STDIN-IS-A-TTY\n")
got = s.read_until(r"MARK-42", BOOT)
check(got is not None, "vm run -t: the guest shell answers what was typed" + ("" if got else ": " + s.tail()))
size = s.read_until(r"(\d+) (\d+)\s+STDIN-IS-A-TTY", 30)
check(size is not None and (int(size.group(1)), int(size.group(2))) == (ROWS, COLS),
      f"vm run -t: its stdin is a terminal of this terminal's size, {ROWS} x {COLS} "
      f"[{size.group(1) + ' x ' + size.group(2) if size else 'none: ' + s.tail()}]")
s.type("sleep 60\n")
time.sleep(3)
s.type(b"\x03")
s.type("echo AFTER-$?\n")
after = s.read_until(r"AFTER-(\d+)", 30)
check(after is not None and after.group(1) == "130",
      "vm run -t: Ctrl-C interrupts the guest's command (status 130), not the VM "
      f"[{after.group(1) if after else 'no answer: ' + s.tail()}]")
s.type("exit 7\n")
status = s.wait(60)
check(status == 7, f"vm run -t: `exit 7` in the guest is wanlab's exit status [{status}]")
check(s.settings_restored(), "vm run -t: the terminal's settings are as before (echo, line editing, signals)")

# 2. wanlab shell FILE, interactive, on a kernel without netem: in the micro-VM.
os.makedirs(WORK, exist_ok=True)
exp = os.path.join(WORK, "terminal.toml")
with open(exp, "w") as f:
    f.write('name = "terminal"\n[link]\nrtt = "100ms"\n[[probe]]\nkind = "rtt"\n')
s = Session([WANLAB, "shell", exp, "--run", "term1"])
s.read_until(PROMPT, BOOT)
s.type("ping -c 4 -i 0.2 -q \"$WANLAB_SERVER\"\n")
rtt = s.read_until(r"= ([0-9.]+)/([0-9.]+)/([0-9.]+)", BOOT)
check(rtt is not None and 100 <= float(rtt.group(1)) <= 125,
      "shell FILE (interactive, micro-VM): its pings cross the emulated 100 ms path "
      f"[min {rtt.group(1) + ' ms' if rtt else 'none: ' + s.tail()}]")
s.type("exit 3\n")
status = s.wait(60)
check(status == 3, f"shell FILE (interactive, micro-VM): the shell's exit status is wanlab's [{status}]")
check("running this in the micro-VM" in s.out.decode(errors="replace"),
      "shell FILE: it says the lab runs in the micro-VM")

# 3. wanlab lab up FILE: a shell in the lab inside the micro-VM; exit takes it down.
s = Session([WANLAB, "lab", "up", exp, "--run", "term2"])
s.read_until(PROMPT, BOOT)
s.type("ping -c 4 -i 0.2 -q \"$WANLAB_SERVER\"; ip netns list | grep -c wanlab-term2\n")
rtt = s.read_until(r"= ([0-9.]+)/[0-9.]+/[0-9.]+.*?\n.*?(\d+)\s", BOOT)
check(rtt is not None and 100 <= float(rtt.group(1)) <= 125 and int(rtt.group(2)) >= 2,
      "lab up (micro-VM): a shell in the lab, whose pings cross the 100 ms path "
      f"[min {rtt.group(1) + ' ms, ' + rtt.group(2) + ' namespaces' if rtt else 'none: ' + s.tail()}]")
s.type("exit\n")
status = s.wait(60)
check(status == 0, f"lab up (micro-VM): exit takes the lab down and ends with status 0 [{status}]")
check("the lab comes up inside the micro-VM" in s.out.decode(errors="replace"), "lab up: it says where the lab is")
check(s.settings_restored(), "lab up: the terminal's settings are as before")

shutil.rmtree(WORK, ignore_errors=True)
if failures:
    print(f"FAIL: {len(failures)} check(s) failed")
    sys.exit(1)
print("PASS: a terminal in the micro-VM")
