/* file_writer.h: an emitter's buffers into a file descriptor. A file's first two buffers are
 *   written by the emitting thread; from the third on a writing thread of its own takes each full
 *   buffer while the emitter fills the next (formatting and the kernel's copy run side by side).
 *   The disk's writeback is started every 8 MiB, so a closing fsync waits for the last stretch.
 * Locking: the writer's mutex, between the emitting thread and the writing thread.
 * Hot path: no (dump time and the command line). */
#ifndef CUPROF_FILE_WRITER_H
#define CUPROF_FILE_WRITER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Full buffers waiting for the writing thread at most; the pool holds one more (being filled). */
#define FILE_WRITER_QUEUE 3

struct file_writer {
    int fd;
    unsigned exchanges; /* buffers handed over so far (the emitting thread's) */
    bool threaded;      /* the writing thread runs: the fields below are protected by lock */
    /* The writing thread's position (the emitting thread's before the thread starts). */
    uint64_t written; /* bytes written */
    uint64_t started; /* of them, bytes whose writeback was started */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int error; /* protected by lock: the first failure (-CUPROF_EIO), then nothing is written */
    int error_errno;                             /* protected by lock: errno of that failure */
    bool stopping;                               /* protected by lock: the queue is complete */
    unsigned char *queue[FILE_WRITER_QUEUE];     /* protected by lock: full buffers, oldest first */
    size_t queue_len[FILE_WRITER_QUEUE];         /* protected by lock */
    unsigned queue_head, queue_count;            /* protected by lock */
    unsigned char *spare[FILE_WRITER_QUEUE + 1]; /* protected by lock: emptied buffers */
    unsigned spare_count;                        /* protected by lock */
    unsigned char *pool[FILE_WRITER_QUEUE + 1];  /* every buffer of the pool, to free */
};

/* Writes to `fd`, which stays the caller's. */
void file_writer_init(struct file_writer *w, int fd);

/* An emitter's exchange (emitter_exchange_buffers, ctx = the writer): takes the `len` bytes at
 * *buf to be written and sets *buf to the buffer to fill next. Returns 0, or -CUPROF_EIO once a
 * write has failed (errno tells why). */
__attribute__((warn_unused_result)) int file_writer_exchange(void *ctx, unsigned char **buf,
                                                             size_t len);

/* Waits until everything handed over is written, stops the thread and frees the pool (an
 * emitter may no longer use a buffer it got). Returns the first failure (errno set) or 0. */
__attribute__((warn_unused_result)) int file_writer_close(struct file_writer *w);

#endif
