"""A consumer waits on queue.Queue.get in its own function while a
producer naps with time.sleep in its own, N times NAP seconds: each side
measures its own waits and prints them on stderr as
`consumer_us=... producer_us=...`.

    python3 pyqueue.py N NAP [go]

With `go`, it waits for a byte on stdin before the measured work. With
OFFWAKE_PIN_CPU=C in the environment, it runs on CPU C only.
"""
import os
import queue
import sys
import threading
import time

waited = [0.0]
napped = [0.0]


def produce_items(q, n, nap):
    for i in range(n):
        start = time.monotonic()
        time.sleep(nap)
        napped[0] += time.monotonic() - start
        q.put(i)
    q.put(None)


def consume_items(q):
    while True:
        start = time.monotonic()
        item = q.get()
        waited[0] += time.monotonic() - start
        if item is None:
            return


def main():
    n, nap = int(sys.argv[1]), float(sys.argv[2])
    cpu = os.environ.get("OFFWAKE_PIN_CPU")
    if cpu is not None:
        os.sched_setaffinity(0, {int(cpu)})
    if sys.argv[3:] == ["go"]:
        sys.stdin.buffer.read(1)
    q = queue.Queue()
    producer = threading.Thread(target=produce_items, args=(q, n, nap))
    producer.start()
    consume_items(q)
    producer.join()
    print(f"consumer_us={int(waited[0] * 1e6)} producer_us={int(napped[0] * 1e6)}",
          file=sys.stderr)


main()
