// A consumer waits on BlockingQueue.take in its own method while a
// producer naps with Thread.sleep in its own, N times NAP milliseconds:
// each side measures its own waits and prints them on stderr as
// `consumer_us=... producer_us=...`. The first round is not measured (and
// waits at lines of its own): it runs each method for the first time,
// when the JVM may stop the thread to compile it (with -Xcomp, every
// method).
//
//     java -cp DIR JQueue N NAP [go]
//
// With `go`, it waits for a byte on stdin before the measured work.

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

public class JQueue {
    static long waited;
    static long napped;

    static void produceItems(BlockingQueue<Integer> q, int n, long nap) throws InterruptedException {
        Thread.sleep(nap); // the first round
        q.put(0);
        for (int i = 1; i <= n; i++) {
            long start = System.nanoTime();
            Thread.sleep(nap);
            napped += System.nanoTime() - start;
            q.put(i);
        }
        q.put(-1);
    }

    static void consumeItems(BlockingQueue<Integer> q) throws InterruptedException {
        q.take(); // the first round
        while (true) {
            long start = System.nanoTime();
            int item = q.take();
            waited += System.nanoTime() - start;
            if (item < 0) {
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long nap = Long.parseLong(args[1]);
        if (args.length > 2 && args[2].equals("go")) {
            System.in.read();
        }
        BlockingQueue<Integer> q = new LinkedBlockingQueue<>();
        Thread producer = new Thread(() -> {
            try {
                produceItems(q, n, nap);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "producer");
        producer.start();
        consumeItems(q);
        producer.join();
        System.err.println("consumer_us=" + waited / 1000 + " producer_us=" + napped / 1000);
    }
}
