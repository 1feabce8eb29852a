"""THREADS threads nap N times each in two functions of their own, SHORT
then LONG milliseconds each time, and measure the naps of each: it prints
`short_us=... long_us=...` (all threads' naps) on stderr.

    python3 pynaps.py THREADS N SHORT LONG

The short naps wait on a futex (a lock that is never released, acquired
with a timeout), the long ones in nanosleep(2), so that a blocked stack
tells by its kernel frames which nap it was. A read of
the thread's frames made after a nap ended finds it in the other
function: the tool must never give that read to the nap before.
With OFFWAKE_PIN_CPU=C in the environment, it runs on CPU C only.
"""
import os
import sys
import threading
import time

took = {"short": 0.0, "long": 0.0}


def short_nap(held, ms):
    start = time.monotonic()
    held.acquire(timeout=ms / 1000)
    took["short"] += time.monotonic() - start


def long_nap(ms):
    start = time.monotonic()
    time.sleep(ms / 1000)
    took["long"] += time.monotonic() - start


def napper(n, short, long):
    held = threading.Lock()
    held.acquire()
    for _ in range(n):
        short_nap(held, short)
        long_nap(long)


def main():
    threads, n = int(sys.argv[1]), int(sys.argv[2])
    short, long = float(sys.argv[3]), float(sys.argv[4])
    cpu = os.environ.get("OFFWAKE_PIN_CPU")
    if cpu is not None:
        os.sched_setaffinity(0, {int(cpu)})
    workers = [threading.Thread(target=napper, args=(n, short, long))
               for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(f"short_us={int(took['short'] * 1e6)} long_us={int(took['long'] * 1e6)}",
          file=sys.stderr)


main()
