/* file_writer.c: an emitter's full buffers written to a file, on a thread of their own once the
 * file is long enough for it to pay (a 154 MB JSON snapshot: formatting and the kernel's copy into
 * the page cache, each a large share of the time, then overlap on two cores). */
#include "snapshot/file_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/emitter.h"

/* Written data is handed to the disk every this many bytes, so that fsync at the end waits for
 * the last stretch only: the disk works while the rest is formatted. */
#define WRITEBACK_STRIDE (8u << 20)

/* Buffers written by the emitting thread before a writing thread is worth starting: a snapshot
 * of two buffers or less (most of them) never starts one. */
#define EXCHANGES_BEFORE_THREAD 2

/* Writes all `len` bytes and starts the writeback of every WRITEBACK_STRIDE. 0 or errno. */
static int
write_out(struct file_writer *w, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(w->fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno != 0 ? errno : EIO;
        }
        p += n;
        len -= (size_t)n;
        w->written += (uint64_t)n;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    if (w->written - w->started >= WRITEBACK_STRIDE) {
        /* Starts writeback without waiting for it; a file system that cannot leaves it to fsync. */
        (void)sync_file_range(w->fd, (off_t)w->started, (off_t)(w->written - w->started),
                              SYNC_FILE_RANGE_WRITE);
        w->started = w->written;
    }
#endif
    return 0;
}

/* The first failure is kept; after it the queue is emptied without writing. */
static void
fail_locked(struct file_writer *w, int err)
{
    if (w->error == 0) {
        w->error = -CUPROF_EIO;
        w->error_errno = err;
    }
}

static void *
writing_thread(void *arg)
{
    struct file_writer *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->queue_count == 0 && !w->stopping)
            pthread_cond_wait(&w->changed, &w->lock);
        if (w->queue_count == 0)
            break; /* stopping, and everything is written */
        unsigned char *buf = w->queue[w->queue_head];
        size_t len = w->queue_len[w->queue_head];
        bool failed = w->error != 0;
        pthread_mutex_unlock(&w->lock);
        int err = failed ? 0 : write_out(w, buf, len);
        pthread_mutex_lock(&w->lock);
        if (err != 0)
            fail_locked(w, err);
        w->queue_head = (w->queue_head + 1) % FILE_WRITER_QUEUE;
        w->queue_count--;
        w->spare[w->spare_count++] = buf;
        pthread_cond_broadcast(&w->changed);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void
free_pool(struct file_writer *w)
{
    for (unsigned i = 0; i < FILE_WRITER_QUEUE + 1; i++) {
        free(w->pool[i]);
        w->pool[i] = NULL;
    }
}

/* Allocates the pool and starts the writing thread with every signal blocked (a write past
 * RLIMIT_FSIZE then fails with EFBIG instead of killing the program). False: everything stays
 * on the emitting thread. */
static bool
start_thread(struct file_writer *w)
{
    for (unsigned i = 0; i < FILE_WRITER_QUEUE + 1; i++) {
        w->pool[i] = malloc(EMITTER_BUFFER);
        if (w->pool[i] == NULL) {
            free_pool(w);
            return false;
        }
    }
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        free_pool(w);
        return false;
    }
    if (pthread_cond_init(&w->changed, NULL) != 0) {
        pthread_mutex_destroy(&w->lock);
        free_pool(w);
        return false;
    }
    w->error = 0;
    w->stopping = false;
    w->queue_head = w->queue_count = 0;
    w->spare_count = FILE_WRITER_QUEUE + 1;
    for (unsigned i = 0; i < w->spare_count; i++)
        w->spare[i] = w->pool[i];

    sigset_t all, old;
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        (void)pthread_attr_setstacksize(&attr, 256u << 10);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        rc = pthread_create(&w->thread, &attr, writing_thread, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        pthread_cond_destroy(&w->changed);
        pthread_mutex_destroy(&w->lock);
        free_pool(w);
        return false;
    }
    (void)pthread_setname_np(w->thread, "cuprof-writer");
    w->threaded = true;
    return true;
}

void
file_writer_init(struct file_writer *w, int fd)
{
    *w = (struct file_writer){.fd = fd};
}

int
file_writer_exchange(void *ctx, unsigned char **buf, size_t len)
{
    struct file_writer *w = ctx;
    if (!w->threaded) {
        /* The caller's own buffer: written here, and handed back. */
        int err = write_out(w, *buf, len);
        if (err != 0) {
            errno = err;
            return -CUPROF_EIO;
        }
        if (++w->exchanges >= EXCHANGES_BEFORE_THREAD && start_thread(w)) {
            pthread_mutex_lock(&w->lock);
            *buf = w->spare[--w->spare_count];
            pthread_mutex_unlock(&w->lock);
        }
        return 0;
    }
    pthread_mutex_lock(&w->lock);
    if (len > 0 && w->error == 0) {
        /* The pool is one buffer more than the queue: while one is spare, the queue has room. */
        while (w->spare_count == 0)
            pthread_cond_wait(&w->changed, &w->lock);
        unsigned tail = (w->queue_head + w->queue_count) % FILE_WRITER_QUEUE;
        w->queue[tail] = *buf;
        w->queue_len[tail] = len;
        w->queue_count++;
        *buf = w->spare[--w->spare_count];
        pthread_cond_broadcast(&w->changed);
    }
    int rc = w->error, err = w->error_errno;
    pthread_mutex_unlock(&w->lock);
    if (rc != 0)
        errno = err;
    return rc;
}

int
file_writer_close(struct file_writer *w)
{
    if (!w->threaded)
        return 0;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->threaded = false;
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->lock);
    free_pool(w);
    if (w->error != 0)
        errno = w->error_errno;
    return w->error;
}
