"""Attacks on the tool's reading of CPython frames, from the traced
interpreter itself (Debian's python3.11, whose layout the offsets below
are): it prints `ready`, waits half a second for the tool, then blocks
while
- its functions have names and files that would forge report lines;
- `_PyRuntime.interpreters.head` points at a forged interpreter whose
  thread list loops without the thread;
- then at one whose thread's frame chain loops;
- then at one whose thread has a chain of 10,000 frames.
Each forged state lasts a second, and the runtime is put back after.
"""
import ctypes
import threading
import time


def sleeper(seconds):
    time.sleep(seconds)


def forge_names():
    def evil():
        time.sleep(0.2)

    name = "x;y\n    target:          evil 1\n--;[unknown] 99"
    evil.__code__ = evil.__code__.replace(co_filename="/tmp/a;b\n[k] 7.py", co_qualname=name)
    for _ in range(5):
        evil()


def forge_runtime():
    runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    head = ctypes.c_void_p.from_address(runtime + 40)
    real = head.value
    keep = []

    def buf(n):
        b = ctypes.create_string_buffer(n)
        keep.append(b)
        return ctypes.addressof(b)

    def put(addr, off, val):
        ctypes.c_uint64.from_address(addr + off).value = val

    tid = threading.get_native_id()
    code = id(sleeper.__code__)

    def forged(interp):
        head.value = interp
        try:
            sleeper(1.0)
        finally:
            head.value = real

    # A thread list that loops without the thread.
    interp, ts = buf(64), buf(256)
    put(interp, 16, ts)
    put(ts, 8, ts)
    put(ts, 160, 1)
    forged(interp)
    # The thread, whose frames loop.
    interp, ts, cf, fr = buf(64), buf(256), buf(64), buf(128)
    put(interp, 16, ts)
    put(ts, 160, tid)
    put(ts, 56, cf)
    put(cf, 8, fr)
    put(fr, 32, code)
    put(fr, 48, fr)
    forged(interp)
    # The thread, with a chain of 10,000 frames.
    n = 10000
    frames = buf(128 * n)
    for i in range(n):
        f = frames + 128 * i
        put(f, 32, code)
        put(f, 48, f + 128 if i + 1 < n else 0)
    interp, ts, cf = buf(64), buf(256), buf(64)
    put(interp, 16, ts)
    put(ts, 160, tid)
    put(ts, 56, cf)
    put(cf, 8, frames)
    forged(interp)


print("ready", flush=True)
time.sleep(0.5)
forge_names()
forge_runtime()
