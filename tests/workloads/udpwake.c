/* udpwake K MS [go]: thread "receiver" blocks K times in recvfrom() on a
 * UDP socket bound to 127.0.0.1, in receiver_wait(); thread "sender" sleeps
 * MS milliseconds then sends it one datagram in sender_send(), K times.
 * Loopback delivery runs the NET_RX softirq in the sender's own context
 * (local_bh_enable at the end of the transmit), so the sender, not a
 * softirq, wakes the receiver. Prints the receiver's time inside recvfrom
 * as "blocked_us=<n>" on stderr. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "rawsys.h"

static int rx, tx, rounds;
static long delay_ms;
static long long receiver_blocked;
static struct sockaddr_in to;

__attribute__((noinline)) long receiver_wait(void)
{
    char c;
    return recvfrom(rx, &c, 1, 0, NULL, NULL);
}

static void *receiver_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "receiver");
    for (int i = 0; i < rounds; i++) {
        long long t0 = now_us();
        if (receiver_wait() != 1)
            exit(1);
        receiver_blocked += now_us() - t0;
    }
    return NULL;
}

__attribute__((noinline)) long sender_send(void)
{
    char c = 'x';
    return sendto(tx, &c, 1, 0, (struct sockaddr *)&to, sizeof(to));
}

static void *sender_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sender");
    struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
    for (int i = 0; i < rounds; i++) {
        nanosleep(&ts, NULL);
        if (sender_send() != 1)
            exit(1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: udpwake K MS [go]\n");
        return 2;
    }
    maybe_pin();
    rounds = atoi(argv[1]);
    delay_ms = atol(argv[2]);
    if (argc > 3 && strcmp(argv[3], "go") == 0)
        wait_for_go();
    rx = socket(AF_INET, SOCK_DGRAM, 0);
    tx = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(to);
    if (rx < 0 || tx < 0 || bind(rx, (struct sockaddr *)&to, sizeof(to)) != 0 ||
        getsockname(rx, (struct sockaddr *)&to, &len) != 0) {
        perror("udp socket");
        return 1;
    }
    pthread_t r, s;
    pthread_create(&r, NULL, receiver_main, NULL);
    pthread_create(&s, NULL, sender_main, NULL);
    pthread_join(r, NULL);
    pthread_join(s, NULL);
    fprintf(stderr, "blocked_us=%lld\n", receiver_blocked);
    return 0;
}
