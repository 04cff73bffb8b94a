"""What a candidate process may do: write only under its scratch folder, no network, no core dumps.

Applied once in the candidate process, after the fork and before any candidate code is imported
(:mod:`kernelopt_core.sandbox.zygote`), with what Linux gives an unprivileged process:

* **Landlock** (kernel >= 5.13): file-system writes only beneath the scratch folder, ``/dev`` (the
  GPU driver opens ``/dev/nvidia*`` read-write) and ``/dev/shm``; reading stays allowed. From
  Landlock ABI 4 the same ruleset also refuses every TCP bind and connect.
* **seccomp**: ``socket()`` for IPv4, IPv6 and raw packet families fails with EACCES, and ``io_uring_setup``
  (which could open sockets behind the filter's back) with ENOSYS; Unix sockets stay (the checker's link).
* **rlimits**: no core files; written files are capped at ``max_file_bytes``.

A protection that cannot be applied (an older kernel, another architecture) is reported, never
silently assumed (:class:`ContainmentReport`). Pure ``ctypes``; no torch.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
from dataclasses import dataclass, field
from typing import Any

from ..json_records import JsonRecord

# --- Landlock (include/uapi/linux/landlock.h) ------------------------------------------------
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

_FS_WRITE_FILE = 1 << 1
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_CHAR = 1 << 6
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_MAKE_SOCK = 1 << 9
_FS_MAKE_FIFO = 1 << 10
_FS_MAKE_BLOCK = 1 << 11
_FS_MAKE_SYM = 1 << 12
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1

_WRITE_ACCESS_V1 = (_FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_CHAR | _FS_MAKE_DIR
                    | _FS_MAKE_REG | _FS_MAKE_SOCK | _FS_MAKE_FIFO | _FS_MAKE_BLOCK | _FS_MAKE_SYM)

# --- seccomp ----------------------------------------------------------------------------------
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_ARCHES = {  # machine -> (AUDIT_ARCH, __NR_socket, __NR_io_uring_setup)
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
_BLOCKED_FAMILIES = (2, 10, 17)  # AF_INET, AF_INET6, AF_PACKET


@dataclass
class SandboxPolicy(JsonRecord):
    scratch: str  # the only folder (with /dev and /dev/shm) the candidate may write beneath
    writable: list[str] = field(default_factory=list)  # further folders, e.g. a private cache
    network: bool = False
    max_file_bytes: int = 16 << 30


@dataclass
class ContainmentReport(JsonRecord):
    """What holds in the candidate process (filled in by :func:`apply_policy`)."""

    pid: int = 0
    filesystem: str = "not applied"  # "landlock ABI n: writes only beneath ..." or why not
    network: str = "not applied"
    limits: str = "not applied"
    contained: bool = False  # file writes and network both restricted
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"file writes: {self.filesystem}; network: {self.network}"


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if platform.system() != "Linux" or platform.machine() not in _ARCHES:
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return int(version) if version > 0 else 0


def _landlock(policy: SandboxPolicy, report: ContainmentReport) -> tuple[bool, bool]:
    """Restrict writes (and TCP from ABI 4). Returns (filesystem restricted, tcp restricted)."""
    abi = landlock_abi()
    if abi <= 0:
        report.filesystem = "NOT restricted: Landlock is unavailable on this kernel"
        return False, False
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = _WRITE_ACCESS_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    attr = struct.pack("=QQ", handled, handled_net) if abi >= 4 else struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        report.filesystem = f"NOT restricted: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
        return False, False
    allowed: list[tuple[str, int]] = [(os.path.realpath(policy.scratch), handled)]
    allowed += [(os.path.realpath(p), handled) for p in policy.writable]
    allowed += [("/dev/shm", handled), ("/dev", _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0))]
    granted: list[str] = []
    try:
        for path, access in allowed:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # e.g. no /dev/shm: nothing to allow there
            try:
                rule = struct.pack("=Qi", access, fd)
                rule_buffer = ctypes.create_string_buffer(rule, len(rule))
                if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                                rule_buffer, ctypes.c_uint32(0)) == 0:
                    granted.append(path)
                else:
                    report.notes.append(f"landlock rule for {path} refused ({os.strerror(ctypes.get_errno())})")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            report.filesystem = f"NOT restricted: no_new_privs refused ({os.strerror(ctypes.get_errno())})"
            return False, False
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            report.filesystem = f"NOT restricted: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
            return False, False
    finally:
        os.close(ruleset)
    report.filesystem = f"Landlock ABI {abi}: writes only beneath {', '.join(granted)}"
    return True, bool(handled_net)


def _seccomp_network(report: ContainmentReport) -> bool:
    machine = platform.machine()
    if platform.system() != "Linux" or machine not in _ARCHES:
        return False
    arch, nr_socket, nr_io_uring = _ARCHES[machine]
    deny = _SECCOMP_RET_ERRNO | errno.EACCES
    program: list[tuple[int, int, int, int]] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),  # another ABI: leave it alone (reported below)
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        program.append((_BPF_JSET_K, 0, 1, 0x40000000))  # x32 syscalls would dodge the numbers below
        program.append((_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS))
    program += [
        (_BPF_JEQ_K, 0, 1, nr_io_uring),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS),
        (_BPF_JEQ_K, 1, 0, nr_socket),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        (_BPF_LD_W_ABS, 0, 0, 16),  # low 32 bits of args[0]: the address family
    ]
    for position, family in enumerate(_BLOCKED_FAMILIES):
        remaining = len(_BLOCKED_FAMILIES) - position - 1
        program.append((_BPF_JEQ_K, remaining + 1, 0, family))
    program += [(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW), (_BPF_RET_K, 0, 0, deny)]
    raw = b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program)
    filters = ctypes.create_string_buffer(raw, len(raw))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Program(len(program), ctypes.cast(filters, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        report.notes.append(f"seccomp: no_new_privs refused ({os.strerror(ctypes.get_errno())})")
        return False
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        report.notes.append(f"seccomp filter refused ({os.strerror(ctypes.get_errno())})")
        return False
    return True


def apply_policy(policy: SandboxPolicy) -> ContainmentReport:
    """Restrict the calling process (and every thread and process it starts afterwards).

    Call it while the process has a single thread. Irreversible by design.
    """
    report = ContainmentReport(pid=os.getpid())
    os.makedirs(policy.scratch, exist_ok=True)
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (policy.max_file_bytes, policy.max_file_bytes))
        report.limits = f"no core files; files up to {policy.max_file_bytes >> 20} MiB"
    except (ValueError, OSError) as exc:
        report.limits = f"not applied ({exc})"
    filesystem, tcp = _landlock(policy, report)
    if policy.network:
        report.network = "allowed by policy"
        network = True
    else:
        sockets = _seccomp_network(report)
        parts = []
        if sockets:
            parts.append("seccomp refuses IPv4/IPv6/packet sockets and io_uring")
        if tcp:
            parts.append("Landlock refuses TCP bind/connect")
        network = bool(parts)
        report.network = "; ".join(parts) if parts else "NOT restricted (neither seccomp nor Landlock ABI >= 4)"
    report.contained = filesystem and network
    return report


__all__ = ["ContainmentReport", "SandboxPolicy", "apply_policy", "landlock_abi"]
