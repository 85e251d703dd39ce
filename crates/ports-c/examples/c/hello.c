/*
 * hello.c: a partition pair on partita's ports, in C (C99 against partita_ports.h).
 *
 *     hello source [COUNT]       writes COUNT messages "hello N" to the sampling port "hello" and sends
 *                                COUNT messages "greeting N" to the queuing port "greetings"
 *     hello destination [COUNT]  receives COUNT greetings and, after each, reads "hello"; prints one line per
 *                                greeting and one per new sampling message
 *
 * COUNT is 5 when not given. The supervisor gives each side its own ends of the two channels (PARTITA_PORTS).
 * Standard output carries one line per message:
 *
 *     source:       sent counter=N
 *     destination:  queuing message="greeting N"
 *                   sampling message="hello N" valid=1
 *
 * A message the other end garbled (a length beyond the channel's maximum, PARTITA_ERR_TOO_LARGE) is a line
 * too, `queuing error=...` or `sampling error=...`, and the destination goes on: a hostile peer costs it a
 * message, not its life. Any other failure ends the program with status 1 and a line on standard error.
 */
#include "partita_ports.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The channels' maximum message size is 32 bytes in the system file; a bigger buffer is harmless. */
#define BUFFER_BYTES 64
/* How long the source waits for room in a full queue, and the destination for a greeting: 10 s. */
#define WAIT_NS INT64_C(10000000000)

static const char *code_name(int code) {
    switch (code) {
    case PARTITA_OK: return "PARTITA_OK";
    case PARTITA_ERR_NO_SUCH_PORT: return "PARTITA_ERR_NO_SUCH_PORT";
    case PARTITA_ERR_WRONG_PORT: return "PARTITA_ERR_WRONG_PORT";
    case PARTITA_ERR_ALREADY_OPEN: return "PARTITA_ERR_ALREADY_OPEN";
    case PARTITA_ERR_TOO_LARGE: return "PARTITA_ERR_TOO_LARGE";
    case PARTITA_ERR_BUFFER_TOO_SMALL: return "PARTITA_ERR_BUFFER_TOO_SMALL";
    case PARTITA_ERR_EMPTY: return "PARTITA_ERR_EMPTY";
    case PARTITA_ERR_FULL: return "PARTITA_ERR_FULL";
    case PARTITA_ERR_TIMED_OUT: return "PARTITA_ERR_TIMED_OUT";
    case PARTITA_ERR_PEER_FAULT: return "PARTITA_ERR_PEER_FAULT";
    case PARTITA_ERR_SYSTEM: return "PARTITA_ERR_SYSTEM";
    case PARTITA_ERR_BAD_DESCRIPTION: return "PARTITA_ERR_BAD_DESCRIPTION";
    case PARTITA_ERR_INVALID_ARGUMENT: return "PARTITA_ERR_INVALID_ARGUMENT";
    case PARTITA_ERR_INTERNAL: return "PARTITA_ERR_INTERNAL";
    default: return "unknown";
    }
}

/* Says on standard error what failed and why; returns the exit status for it. */
static int fail(const char *what, int code) {
    fprintf(stderr, "hello: %s: %s (%s): %s\n", what, code_name(code), partita_ports_strerror(code), partita_ports_last_error());
    return 1;
}

static int source(long count) {
    int err;
    partita_sampling_source *hello = partita_sampling_source_open("hello", &err);
    if (hello == NULL) {
        return fail("open the sampling port \"hello\"", err);
    }
    partita_queuing_source *greetings = partita_queuing_source_open("greetings", &err);
    if (greetings == NULL) {
        partita_sampling_source_close(hello);
        return fail("open the queuing port \"greetings\"", err);
    }
    int status = 0;
    for (long n = 1; n <= count && status == 0; n++) {
        char msg[BUFFER_BYTES];
        /* The sampling message first: a destination that has the greeting N finds "hello N" or later. */
        int len = snprintf(msg, sizeof msg, "hello %ld", n);
        int rc = partita_sampling_write(hello, msg, (size_t)len);
        if (rc != PARTITA_OK) {
            status = fail("write \"hello\"", rc);
            break;
        }
        len = snprintf(msg, sizeof msg, "greeting %ld", n);
        rc = partita_queuing_send(greetings, msg, (size_t)len, WAIT_NS);
        if (rc != PARTITA_OK) {
            status = fail("send \"greetings\"", rc);
            break;
        }
        printf("sent counter=%ld\n", n);
        fflush(stdout);
    }
    partita_queuing_source_close(greetings);
    partita_sampling_source_close(hello);
    return status;
}

/* The sampling port's last outcome, so that only changes are printed: the message's text, or an error code. */
struct last_sample {
    char text[BUFFER_BYTES];
    size_t len;
    int code;
};

/* Reads "hello" and prints a line if what it found differs from the last line printed. Returns 0, or the
 * exit status of a failure the destination cannot go on after. */
static int read_hello(partita_sampling_destination *hello, struct last_sample *last) {
    char buf[BUFFER_BYTES];
    size_t len = 0;
    uint64_t age_ns = 0;
    int valid = 0;
    int rc = partita_sampling_read(hello, buf, sizeof buf, &len, &age_ns, &valid);
    switch (rc) {
    case PARTITA_OK:
        if (last->code == PARTITA_OK && last->len == len && memcmp(last->text, buf, len) == 0) {
            return 0;
        }
        printf("sampling message=\"%.*s\" valid=%d\n", (int)len, buf, valid);
        memcpy(last->text, buf, len);
        last->len = len;
        break;
    case PARTITA_ERR_EMPTY:
        /* Nothing written yet: the source writes "hello" before each greeting, so this does not last. */
        return 0;
    case PARTITA_ERR_TOO_LARGE:
    case PARTITA_ERR_PEER_FAULT:
        if (last->code == rc) {
            return 0;
        }
        printf("sampling error=%s: %s\n", code_name(rc), partita_ports_last_error());
        break;
    default:
        return fail("read \"hello\"", rc);
    }
    last->code = rc;
    fflush(stdout);
    return 0;
}

static int destination(long count) {
    int err;
    partita_sampling_destination *hello = partita_sampling_destination_open("hello", &err);
    if (hello == NULL) {
        return fail("open the sampling port \"hello\"", err);
    }
    partita_queuing_destination *greetings = partita_queuing_destination_open("greetings", &err);
    if (greetings == NULL) {
        partita_sampling_destination_close(hello);
        return fail("open the queuing port \"greetings\"", err);
    }
    struct last_sample last = {{0}, 0, PARTITA_ERR_EMPTY};
    int status = 0;
    for (long n = 1; n <= count && status == 0; n++) {
        char buf[BUFFER_BYTES];
        size_t len = 0;
        int rc = partita_queuing_receive(greetings, buf, sizeof buf, &len, WAIT_NS);
        if (rc == PARTITA_OK) {
            printf("queuing message=\"%.*s\"\n", (int)len, buf);
        } else if (rc == PARTITA_ERR_TOO_LARGE) {
            /* The sender wrote a length beyond the channel: that message is dropped, the queue goes on. */
            printf("queuing error=%s: %s\n", code_name(rc), partita_ports_last_error());
        } else {
            status = fail("receive \"greetings\"", rc);
            break;
        }
        fflush(stdout);
        status = read_hello(hello, &last);
    }
    partita_queuing_destination_close(greetings);
    partita_sampling_destination_close(hello);
    return status;
}

int main(int argc, char **argv) {
    long count = 5;
    if (argc == 3) {
        char *end;
        count = strtol(argv[2], &end, 10);
        if (*argv[2] == '\0' || *end != '\0' || count < 1) {
            fprintf(stderr, "hello: COUNT must be a positive number, not \"%s\"\n", argv[2]);
            return 2;
        }
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: hello source|destination [COUNT]\n");
        return 2;
    }
    /* Optional (the first open reads PARTITA_PORTS too), but a misconfigured partition says so first thing. */
    int rc = partita_ports_open();
    if (rc != PARTITA_OK) {
        return fail("read PARTITA_PORTS", rc);
    }
    if (strcmp(argv[1], "source") == 0) {
        return source(count);
    }
    if (strcmp(argv[1], "destination") == 0) {
        return destination(count);
    }
    fprintf(stderr, "hello: the first argument is source or destination, not \"%s\"\n", argv[1]);
    return 2;
}
