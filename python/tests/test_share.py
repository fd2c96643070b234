"""Tensors shared between real processes: dlport.share, dlport.Shared, dlport.open_shared.

Each test runs a child Python process (subprocess) holding one end of a socketpair; the parent
shares, the child opens (zero copy) and writes, and the parent sees the write in the same
pages. Linux only (memfd seals and SCM_RIGHTS)."""

import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlport

from conftest import collect

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="sharing is Linux only")

PRELUDE = """
import os, socket, sys
import numpy as np
import dlport
sock = socket.socket(fileno=int(os.environ["DLPORT_TEST_SOCK"]))
"""


def child(code, sock):
    """Starts `code` in a new Python process with `sock` (its end of a socketpair) as `sock`."""
    env = dict(os.environ, DLPORT_TEST_SOCK=str(sock.fileno()))
    return subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        pass_fds=[sock.fileno()],
        env=env,
    )


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield a, b
    a.close()
    b.close()


def finish(proc):
    assert proc.wait(timeout=60) == 0, "the child failed (its traceback is above)"


def test_a_child_opens_a_shared_numpy_array_and_its_writes_show_here(pair):
    parent, other = pair
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = dlport.share(a)  # plain NumPy memory: copied into a memfd
    assert isinstance(s.descriptor, bytes) and len(s.fds) == 1
    assert "Memfd" in repr(s)
    mine = np.from_dlpack(s.open())
    assert mine.flags.writeable and (mine == a).all()

    proc = child(
        """
        t = dlport.Shared.recv(sock).open()
        assert (t.shape, t.dtype, t.device, t.readonly) == ((3, 4), "float32", "cpu", False)
        b = np.from_dlpack(t)
        assert (b == np.arange(12, dtype=np.float32).reshape(3, 4)).all()
        b[1, 2] = -7.5
        sock.sendall(b"w")
        assert sock.recv(1) == b"r"      # the parent wrote back
        assert b[0, 0] == 42.0
        """,
        other,
    )
    s.send(parent)
    assert parent.recv(1) == b"w"
    assert mine[1, 2] == -7.5, "the child's write is in the same pages"
    assert a[1, 2] == 6.0, "the NumPy array itself was copied, not shared"
    mine[0, 0] = 42.0
    parent.sendall(b"r")
    finish(proc)


def test_descriptor_and_fds_travel_through_a_transport_of_ones_own(pair):
    parent, other = pair
    t = dlport.from_dlpack(np.arange(6, dtype=np.int64))
    s = dlport.share(t, copy=True)
    opened = s.open()
    proc = child(
        """
        msg, fds, _, _ = socket.recv_fds(sock, 4096, 4)
        t = dlport.open_shared(msg, fds)
        for fd in fds:   # borrowed: the tensor does not need them
            os.close(fd)
        b = np.from_dlpack(t)
        assert b.tolist() == [0, 1, 2, 3, 4, 5]
        b *= 10
        sock.sendall(b"w")
        """,
        other,
    )
    socket.send_fds(parent, [s.descriptor], s.fds)
    assert parent.recv(1) == b"w"
    finish(proc)
    assert np.from_dlpack(opened).tolist() == [0, 10, 20, 30, 40, 50]
    # A re-open from the descriptor here maps the same pages again.
    again = dlport.open_shared(s.descriptor, s.fds)
    assert memoryview(again).tolist() == [0, 10, 20, 30, 40, 50]


def test_a_child_killed_with_sigkill_does_not_break_the_parent(pair):
    parent, other = pair
    s = dlport.share(np.full(1024, 3, dtype=np.uint8))
    mine = np.from_dlpack(s.open())
    proc = child(
        """
        b = np.from_dlpack(dlport.Shared.recv(sock).open())
        b[:] = 9
        sock.sendall(b"w")
        import time
        time.sleep(600)
        """,
        other,
    )
    s.send(parent)
    assert parent.recv(1) == b"w"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert (mine == 9).all()
    mine[:] = 1
    # The parent's opened tensor shares on without a copy (it is one of dlport's memfds), and
    # a fresh open still maps the live pages.
    on = dlport.share(dlport.from_dlpack(mine), copy=False)
    assert (np.from_dlpack(on.open()) == 1).all()
    del mine, on, s
    collect()


def test_bad_descriptor_bytes_raise_value_error_naming_the_field():
    s = dlport.share(np.zeros((2, 3), dtype=np.float64))
    d, fds = s.descriptor, s.fds
    with pytest.raises(ValueError, match="descriptor length") as e:
        dlport.open_shared(d[:20], fds)
    assert e.value.code == 41
    future = d[:4] + struct.pack("<H", 2) + d[6:]
    with pytest.raises(ValueError, match="descriptor.version"):
        dlport.open_shared(future, fds)
    with pytest.raises(ValueError, match="descriptor.magic"):
        dlport.open_shared(b"NOPE" + d[4:], fds)
    with pytest.raises(ValueError, match="fd count"):
        dlport.open_shared(d, [])
    with pytest.raises(ValueError, match="fds contains -1"):
        dlport.open_shared(d, [-1])
    r, w = os.pipe()
    try:
        with pytest.raises(ValueError, match="not a memfd"):
            dlport.open_shared(d, [r])
    finally:
        os.close(r)
        os.close(w)
    assert np.from_dlpack(dlport.open_shared(d, fds)).shape == (2, 3)


def test_copy_false_refuses_plain_memory_and_copy_true_always_copies():
    a = np.ones(8, dtype=np.int32)
    with pytest.raises(BufferError, match="copy"):
        dlport.share(a, copy=False)
    opened = dlport.share(a).open()
    same = dlport.share(opened, copy=False).open()  # dlport's memfd: no copy
    fresh = dlport.share(opened, copy=True).open()  # a new memfd
    np.from_dlpack(opened)[0] = 5
    assert np.from_dlpack(same)[0] == 5
    assert np.from_dlpack(fresh)[0] == 1


def test_opened_tensors_keep_dtype_shape_and_values_for_numpy():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]  # strided: copied compact
    b = np.from_dlpack(dlport.share(a).open())
    assert b.dtype == np.int16 and b.shape == (4, 3) and (b == a).all()
    e = np.from_dlpack(dlport.share(np.zeros((3, 0), dtype=np.float32)).open())
    assert e.shape == (3, 0)


def test_read_only_shares_open_read_only(pair):
    parent, other = pair
    s = dlport.share(np.arange(4, dtype=np.float32), read_only=True)
    proc = child(
        """
        t = dlport.Shared.recv(sock).open()
        assert t.readonly and not np.from_dlpack(t).flags.writeable
        assert memoryview(t).readonly
        """,
        other,
    )
    s.send(parent)
    finish(proc)


def test_wrong_arguments_raise_type_error_and_a_closed_peer_os_error(pair):
    parent, other = pair
    with pytest.raises(TypeError):
        dlport.share(object())
    with pytest.raises(TypeError, match="copy must be True, False or None, got 'no'"):
        dlport.share(np.zeros(2), copy="no")
    with pytest.raises(TypeError, match="read_only must be True or False, got 'yes'"):
        dlport.share(np.zeros(2), read_only="yes")
    import inspect

    assert "read_only=False" in str(inspect.signature(dlport.share))
    s = dlport.share(np.zeros(2))
    with pytest.raises(TypeError, match="socket"):
        s.send(123)
    with pytest.raises(TypeError):
        dlport.open_shared("not bytes", s.fds)
    other.close()
    with pytest.raises(OSError):
        dlport.Shared.recv(parent)


ATTACK = """
import errno, fcntl, mmap, subprocess

F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
F_SEAL_FUTURE_WRITE = 0x10
s = dlport.Shared.recv(sock)
fd = s.fds[0]
n = os.fstat(fd).st_size
report = []


class Private(Exception):
    pass


def attempt(label, what, f):
    try:
        f()
        report.append(f"attempt|{label}|{what}|GOT THROUGH")
    except Private:
        report.append(f"attempt|{label}|{what}|refused (the write stayed in a private copy)")
    except OSError as e:
        report.append(f"attempt|{label}|{what}|refused {errno.errorcode.get(e.errno, e.errno)}")


def shared_map(f):
    m = mmap.mmap(f, n, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0] = 0xA5
    m.close()


def private_write(f):
    before = os.pread(f, 1, 0)
    m = mmap.mmap(f, n, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0] = before[0] ^ 0x5A
    m.close()
    if os.pread(f, 1, 0) == before:
        raise Private()


def attacks(label, f):
    attempt(label, "os.pwrite", lambda: os.pwrite(f, b"\\xa5", 0))
    attempt(label, "os.write", lambda: (os.lseek(f, 0, os.SEEK_SET), os.write(f, b"\\xa5")))
    attempt(label, "mmap(MAP_SHARED, PROT_WRITE)", lambda: shared_map(f))
    attempt(label, "a MAP_PRIVATE write reaching the memfd", lambda: private_write(f))
    attempt(label, "os.ftruncate(0)", lambda: os.ftruncate(f, 0))
    attempt(label, "os.ftruncate(grow)", lambda: os.ftruncate(f, n + 4096))
    attempt(label, "os.posix_fallocate(grow)", lambda: os.posix_fallocate(f, n, 4096))
    attempt(label, "fcntl(F_ADD_SEALS)", lambda: fcntl.fcntl(f, F_ADD_SEALS, F_SEAL_FUTURE_WRITE))
    attempt(label, "os.truncate(/proc/self/fd/N)", lambda: os.truncate(f"/proc/self/fd/{f}", 0))


attacks("received fd", fd)
attacks("reopened O_RDWR", os.open(f"/proc/self/fd/{fd}", os.O_RDWR))
attacks("reopened O_WRONLY, O_APPEND", os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_APPEND))
# The producer's own fds of the same memfd, through /proc/<pid>/fd.
st = os.fstat(fd)
ppid = os.getppid()
for name in os.listdir(f"/proc/{ppid}/fd"):
    path = f"/proc/{ppid}/fd/{name}"
    try:
        other = os.stat(path)
    except OSError:
        continue
    if (other.st_ino, other.st_dev) == (st.st_ino, st.st_dev):
        try:
            attacks(f"the producer's {path} reopened O_RDWR", os.open(path, os.O_RDWR))
        except OSError as e:
            report.append(f"note {path}: {e}")
# Passing the fd on: another process tries again.
relay = subprocess.run(
    [sys.executable, "-c", "import os, sys; f = os.open(f'/proc/self/fd/{sys.argv[1]}', os.O_RDWR); "
     "os.pwrite(f, b'\\\\xa5', 0)", str(fd)],
    pass_fds=[fd], capture_output=True, text=True,
)
err = relay.stderr.strip().splitlines()[-1] if relay.returncode else ""
report.append(f"attempt|passed on|os.pwrite after a reopen|" + (f"refused {err}" if relay.returncode else "GOT THROUGH"))
sock.sendall(("\\n".join(report) + "\\n\\n").encode())
"""

ATTEMPTS = 9  # per fd reached, in ATTACK


def pattern(n):
    return (np.arange(n, dtype=np.int64) * 7 + 3) % 251


def attacked(s, pair):
    """Sends `s` to an attacker child; returns its report (one line per attempt)."""
    parent, other = pair
    proc = child(ATTACK, other)
    s.send(parent)
    data = b""
    while not data.endswith(b"\n\n"):
        chunk = parent.recv(65536)
        assert chunk, "the attacker closed the socket"
        data += chunk
    finish(proc)
    report = data.decode().strip().splitlines()
    print("\n".join(report))
    return report


def assert_all_refused(report):
    attempts = [line.split("|") for line in report if line.startswith("attempt|")]
    through = [f"{fd}: {what}" for _, fd, what, outcome in attempts if not outcome.startswith("refused")]
    assert not through, f"{len(through)} attempts got through: {through}"
    reached = {fd for _, fd, _, _ in attempts}
    for fd in ["received fd", "reopened O_RDWR", "reopened O_WRONLY, O_APPEND", "passed on"]:
        assert fd in reached, f"{fd} was not tried"
    assert len(attempts) >= 3 * ATTEMPTS + 1


def test_a_read_only_share_is_unwritable_by_a_peer_whatever_it_does_with_the_fd(pair):
    n = 3 * 4096 + 5
    a = pattern(n).astype(np.uint8)
    s = dlport.share(a, read_only=True)  # NumPy memory: a write-sealed copy
    assert s.copied
    assert_all_refused(attacked(s, pair))
    mine = np.from_dlpack(s.open())
    assert not mine.flags.writeable
    assert (mine == pattern(n)).all(), "the shared bytes changed"
    assert (a == pattern(n)).all()


def test_a_memfd_shared_writable_is_shared_read_only_only_as_a_sealed_copy(pair):
    n = 8192
    w = dlport.share(pattern(n).astype(np.uint8))
    assert w.copied
    mine = w.open()  # one of dlport's memfds, mapped writable here
    with pytest.raises(BufferError, match="shared writable before") as e:
        dlport.share(mine, read_only=True, copy=False)
    assert "allow a copy" in str(e.value)
    s = dlport.share(mine, read_only=True)
    assert s.copied
    assert_all_refused(attacked(s, pair))
    assert (np.from_dlpack(s.open()) == pattern(n)).all()
    # The writable share keeps its promise: its peers still map it writable.
    assert np.from_dlpack(w.open()).flags.writeable
    # And a read-only share re-shared from its opened tensor is the same sealed memfd.
    on = dlport.share(s.open(), copy=False)
    assert not on.copied and on.open().readonly


def test_a_read_only_descriptor_over_an_unsealed_memfd_is_refused():
    w = dlport.share(np.zeros(16, dtype=np.uint8))  # writable: no write seal
    d = bytearray(w.descriptor)
    d[32] |= 1  # READ_ONLY, as a hostile producer would claim
    ro_fd = os.open(f"/proc/self/fd/{w.fds[0]}", os.O_RDONLY)
    try:
        for fds in (w.fds, [ro_fd]):
            with pytest.raises(ValueError, match="no write seal"):
                dlport.open_shared(bytes(d), fds)
    finally:
        os.close(ro_fd)
