/*
 * partita_ports.h: ARINC 653 sampling and queuing ports for C programs in partita partitions.
 *
 * The supervisor gives a partition its ports as inherited descriptors, named in the environment variable
 * PARTITA_PORTS; a program opens each port by the name its system file gives the channel's end. A sampling
 * port carries the latest message of its channel (each write overwrites it; a read returns it with its age and
 * whether it is valid, that is no older than the channel's refresh period). A queuing port is a bounded FIFO
 * from one source to one destination.
 *
 * Link with the static library of the crate partita-ports-c and the system libraries every Rust static
 * library needs:
 *
 *     cc -std=c99 -I crates/ports-c/include program.c target/release/libpartita_ports_c.a -lpthread -ldl -lm
 *
 * Return codes. Every function that can fail returns an int: PARTITA_OK (0) or one of the negative codes of
 * enum partita_ports_code; the functions that open a port return a handle, or NULL with the code in *err.
 * partita_ports_strerror(code) says what a code means in general; partita_ports_last_error() says what
 * exactly failed last on the calling thread (which port, which sizes).
 *
 * Ownership. A handle belongs to the program from the _open call that returned it until it is passed to the
 * matching _close, which frees it; it is not used after that. A port can be opened once per process: after
 * its _close, opening the same name again returns PARTITA_ERR_ALREADY_OPEN. Message and buffer pointers stay
 * the program's: they are read or written only during the call that receives them. Strings the library
 * returns belong to the library and are never freed by the program.
 *
 * Threads. A handle is used by one thread at a time (it has no lock: a second thread on the same handle at the
 * same time is undefined behaviour). Different handles may be used by different threads at once, and any
 * thread may open ports. The last error is per thread.
 *
 * Waiting. A timeout is in nanoseconds on the monotonic clock: 0 does not wait, a negative timeout waits
 * without end, a positive one at most that long. Time the partition spends frozen outside its windows counts.
 * A signal does not end a wait: a program that must react to signals waits with a finite timeout.
 *
 * The other end is untrusted. What a port reads from its channel is validated; what another partition wrote
 * wrongly is reported (PARTITA_ERR_TOO_LARGE, PARTITA_ERR_PEER_FAULT) and counted in the port's status, which
 * the supervisor's health monitor reads. No message a peer writes makes the library read or write outside the
 * channel's memory or the caller's buffer.
 */
#ifndef PARTITA_PORTS_H
#define PARTITA_PORTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The return codes: PARTITA_OK, or what failed. The names follow the Rust crate's PortError variants. */
enum partita_ports_code {
    /* Done. */
    PARTITA_OK = 0,
    /* No port of this name was given to this partition: add a channel with this port to the system file. */
    PARTITA_ERR_NO_SUCH_PORT = -1,
    /* The port exists but is of another kind (sampling, queuing) or direction (source, destination). */
    PARTITA_ERR_WRONG_PORT = -2,
    /* The port is already open in this process (or was, and has been closed). */
    PARTITA_ERR_ALREADY_OPEN = -3,
    /* A message longer than the channel's maximum: one the caller tried to send (refused, nothing sent), or a
     * length the other end wrote into the channel (the message is dropped; a queue moves on to the next). */
    PARTITA_ERR_TOO_LARGE = -4,
    /* The message does not fit the buffer given; *len holds its length, the message is not taken. */
    PARTITA_ERR_BUFFER_TOO_SMALL = -5,
    /* No message: nothing written to the sampling channel yet, or an empty queue and a timeout of 0. */
    PARTITA_ERR_EMPTY = -6,
    /* The queue is full and the timeout is 0: nothing sent (counted as an overflow). */
    PARTITA_ERR_FULL = -7,
    /* The timeout passed first: nothing sent or received. */
    PARTITA_ERR_TIMED_OUT = -8,
    /* The other end's memory holds values no valid writer writes: the message is not taken. */
    PARTITA_ERR_PEER_FAULT = -9,
    /* A system call failed (mapping the channel's memory, a futex). */
    PARTITA_ERR_SYSTEM = -10,
    /* PARTITA_PORTS is not what the supervisor writes. */
    PARTITA_ERR_BAD_DESCRIPTION = -11,
    /* A NULL pointer where one is required, or a port name that is not UTF-8. */
    PARTITA_ERR_INVALID_ARGUMENT = -12,
    /* An internal error of the library (a bug, caught before it reached the caller): the operation may be
     * half done. */
    PARTITA_ERR_INTERNAL = -13
};

/* The handles: opaque, one per open port. */
typedef struct partita_sampling_source partita_sampling_source;
typedef struct partita_sampling_destination partita_sampling_destination;
typedef struct partita_queuing_source partita_queuing_source;
typedef struct partita_queuing_destination partita_queuing_destination;

/*
 * Reads PARTITA_PORTS and takes over the descriptors it names (they become close-on-exec: programs this one
 * starts do not get its ports). Done once per process: later calls return the first call's outcome. Calling it
 * is optional (the first _open does it) but tells a misconfigured partition at start.
 * Without PARTITA_PORTS (outside a partition, or a partition given no ports) it succeeds with no ports.
 * Returns PARTITA_OK, PARTITA_ERR_BAD_DESCRIPTION or PARTITA_ERR_SYSTEM (a named descriptor not open).
 */
int partita_ports_open(void);

/*
 * Opens the sampling source port `name` (a NUL-terminated UTF-8 string, read during the call only).
 * Returns its handle, owned by the caller until partita_sampling_source_close, or NULL on failure. *err (err
 * may be NULL) is set to PARTITA_OK or to PARTITA_ERR_NO_SUCH_PORT, PARTITA_ERR_WRONG_PORT,
 * PARTITA_ERR_ALREADY_OPEN, PARTITA_ERR_PEER_FAULT (the channel's memory is not as the supervisor makes it),
 * PARTITA_ERR_SYSTEM, PARTITA_ERR_BAD_DESCRIPTION, PARTITA_ERR_INVALID_ARGUMENT (name NULL or not UTF-8).
 */
partita_sampling_source *partita_sampling_source_open(const char *name, int *err);

/*
 * Writes the `len` bytes at `msg` as the channel's latest message (copied; msg stays the caller's and may be
 * NULL when len is 0). Never waits.
 * Returns PARTITA_OK, PARTITA_ERR_TOO_LARGE (len above the channel's maximum: nothing written),
 * PARTITA_ERR_INVALID_ARGUMENT (src NULL, or msg NULL with len > 0).
 */
int partita_sampling_write(partita_sampling_source *src, const void *msg, size_t len);

/* Closes `src` and frees it; NULL is ignored. The channel keeps the last message written. */
void partita_sampling_source_close(partita_sampling_source *src);

/*
 * Opens the sampling destination port `name`, as partita_sampling_source_open (same codes in *err). The handle
 * holds a buffer of the channel's maximum message size, allocated here.
 */
partita_sampling_destination *partita_sampling_destination_open(const char *name, int *err);

/*
 * Copies the channel's latest message into `buf`, which holds `cap` bytes (buf may be NULL when cap is 0, to
 * ask the message's length). A message can be read any number of times, until the next write replaces it.
 * On PARTITA_OK: *len is the message's length (its bytes are the first *len of buf, nothing is written past
 * them); *age_ns is how long ago it was written (CLOCK_MONOTONIC, shared by every partition of the machine);
 * *valid is 1 if that age is within the channel's refresh period, else 0 (a stale message, counted in the
 * port's status). age_ns and valid may be NULL; len may not.
 * Returns PARTITA_OK, PARTITA_ERR_EMPTY (nothing written yet), PARTITA_ERR_BUFFER_TOO_SMALL (*len is the
 * message's length: give a buffer of the channel's maximum message size), PARTITA_ERR_TOO_LARGE (the writer
 * wrote a length above the channel's maximum), PARTITA_ERR_PEER_FAULT (a write that never ends, or a message
 * written in the future), PARTITA_ERR_INVALID_ARGUMENT (dst or len NULL, buf NULL with cap > 0). On the
 * port's own failures (not PARTITA_ERR_INVALID_ARGUMENT or PARTITA_ERR_INTERNAL), *len is set: to the message's
 * length if the buffer is too small, else 0. *age_ns and *valid are set on success only.
 */
int partita_sampling_read(partita_sampling_destination *dst, void *buf, size_t cap, size_t *len, uint64_t *age_ns, int *valid);

/* Closes `dst` and frees it and its buffer; NULL is ignored. */
void partita_sampling_destination_close(partita_sampling_destination *dst);

/* Opens the queuing source port `name`, as partita_sampling_source_open (same codes in *err). */
partita_queuing_source *partita_queuing_source_open(const char *name, int *err);

/*
 * Appends a copy of the `len` bytes at `msg` to the queue (msg may be NULL when len is 0). When the queue is
 * full it waits for room as `timeout_ns` says: 0 not at all, negative without end, positive at most that many
 * nanoseconds.
 * Returns PARTITA_OK, PARTITA_ERR_TOO_LARGE (len above the channel's maximum: refused at once, nothing
 * sent), PARTITA_ERR_FULL (full, timeout 0), PARTITA_ERR_TIMED_OUT (still full at the timeout),
 * PARTITA_ERR_PEER_FAULT (the receiver's counters are impossible), PARTITA_ERR_SYSTEM (a futex call failed),
 * PARTITA_ERR_INVALID_ARGUMENT (src NULL, or msg NULL with len > 0). A full queue is counted as an overflow in
 * the port's status.
 */
int partita_queuing_send(partita_queuing_source *src, const void *msg, size_t len, int64_t timeout_ns);

/* Closes `src` and frees it; NULL is ignored. Messages already sent stay in the queue. */
void partita_queuing_source_close(partita_queuing_source *src);

/*
 * Opens the queuing destination port `name`, as partita_sampling_source_open (same codes in *err). The handle
 * holds a buffer of the channel's maximum message size, allocated here.
 */
partita_queuing_destination *partita_queuing_destination_open(const char *name, int *err);

/*
 * Takes the oldest message of the queue into `buf`, which holds `cap` bytes (buf may be NULL when cap is 0, to
 * ask the next message's length). When the queue is empty it waits as `timeout_ns` says (see
 * partita_queuing_send). On PARTITA_OK, *len is the message's length: its bytes are the first *len of buf.
 * Returns PARTITA_OK, PARTITA_ERR_EMPTY (empty, timeout 0), PARTITA_ERR_TIMED_OUT, PARTITA_ERR_BUFFER_TOO_SMALL
 * (*len is the message's length; the message stays in the queue), PARTITA_ERR_TOO_LARGE (the sender wrote a
 * length above the channel's maximum: that message is dropped, the next call gets the next one),
 * PARTITA_ERR_PEER_FAULT (the sender's counters are impossible: nothing taken), PARTITA_ERR_SYSTEM,
 * PARTITA_ERR_INVALID_ARGUMENT (dst or len NULL, buf NULL with cap > 0). On the port's own failures (not
 * PARTITA_ERR_INVALID_ARGUMENT or PARTITA_ERR_INTERNAL), *len is set: to the message's length if the buffer is
 * too small, else 0.
 */
int partita_queuing_receive(partita_queuing_destination *dst, void *buf, size_t cap, size_t *len, int64_t timeout_ns);

/* Closes `dst` and frees it and its buffer; NULL is ignored. Messages not yet received stay in the queue. */
void partita_queuing_destination_close(partita_queuing_destination *dst);

/*
 * What `code` means, in one English sentence; "unknown partita ports code" for a number that is not one.
 * The string is static: never freed, never changed.
 */
const char *partita_ports_strerror(int code);

/*
 * What the last failed call of this library on the calling thread failed with, in detail (the port's name, the
 * sizes involved, the system error); "" before any failure. Owned by the library: valid until the next failing
 * call on the same thread, or until the thread ends. Successful calls do not change it.
 */
const char *partita_ports_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* PARTITA_PORTS_H */
