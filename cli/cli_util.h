/* cli_util.h: what every cuprof subcommand shares: loading a snapshot with one clear error line,
 *   text from outside escaped for a terminal or JSON, size formatting, stack printing, progress
 *   on a terminal, usage errors.
 * Locking: none, but cli_load's standard input (its own mutex: cross_rank reads in threads).
 * Hot path: no. */
#ifndef CUPROF_CLI_UTIL_H
#define CUPROF_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snapshot/emitter.h"
#include "snapshot/snapshot_model.h"

/* Exit statuses of every subcommand. */
enum cli_exit {
    CLI_OK = 0,     /* done, nothing found */
    CLI_FOUND = 1,  /* done, found a problem (leaks, replay differences) */
    CLI_BADUSE = 2, /* bad usage or unreadable input */
    /* `cuprof run`'s PROG could not start, with a shell's statuses: */
    CLI_PROG_NOT_RUNNABLE = 126, /* a directory, not executable, not a format the kernel runs */
    CLI_PROG_NOT_FOUND = 127,    /* no such file, or not in PATH */
};

/* Byte counts in signed arithmetic that saturates: a hostile snapshot (sizes near 2^57 added
 * many times) gives absurd totals, never signed overflow. */
static inline int64_t
cli_i64(uint64_t v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}
static inline int64_t
cli_add_i64(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* What `-` (standard input) is called in messages. */
#define CLI_STDIN_NAME "standard input"

/* Reads a snapshot (pickle or JSON): a regular file, or `-` for standard input (a pipe is read
 * once; a second read of it fails). On failure prints one line naming the file and returns
 * CLI_BADUSE; returns CLI_OK and sets *out otherwise. */
__attribute__((warn_unused_result)) int cli_load(const char *path, struct snapshot **out);

/* Text from outside (a snapshot's strings, paths, argv) for a terminal or a text report: s itself
 * when it holds no control character or undecodable byte, else its escaped form (text_escape.h)
 * in buf, cut to len. NULL reads as "". */
const char *cli_term(const char *s, char *buf, size_t len);
/* fputs of s escaped the same way, uncut; NULL writes nothing. */
void cli_fputs_term(const char *s, FILE *out);

/* Prints "cuprof: <cmd>: <message>" and a hint to --help on stderr; returns CLI_BADUSE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* PyTorch's format_size: "123 bytes", "1.50 KiB", "20.00 MiB", "3.00 GiB". */
const char *cli_size(uint64_t bytes, char *buf, size_t len);

/* PyTorch's action string for enum trace_action ("alloc", "free_completed", ...). */
const char *cli_action_name(unsigned action);

/* "name (file:line)" of a frame, or just name when the file is unknown: the snapshot's text as it
 * is (cli_term it for a terminal, cli_json_string for JSON). */
void cli_frame_text(const struct snapshot *snap, uint32_t frame, char *buf, size_t len);
/* A frame that stands for a library's frames (cli/frame_entry.h): its name is CLI_VIA_PREFIX and
 * the entry point the user's code called ("via numba.cuda.api.to_device"), its file "" and its
 * line unknown. No C or Python function's name holds a space, so no real frame reads so. */
#define CLI_VIA_PREFIX "via "
bool cli_frame_is_via(const struct snapshot *snap, uint32_t frame);
/* Prints a stack, innermost first, one frame per line after `indent` spaces (at most max_frames,
 * then "... N more"), escaped for a terminal; "[no stack recorded]" for the empty stack. A via
 * frame innermost is printed beside the frame that follows it: `load (app.py:7) via
 * numba.cuda.api.to_device`. */
void cli_print_stack(FILE *out, const struct snapshot *snap, uint32_t stack, int indent,
                     size_t max_frames);
/* A call site's name on one line: its first `frames` frames joined by " < " (a via frame
 * innermost beside the next, as cli_print_stack prints it), escaped for a terminal, cut to len;
 * "[no stack recorded]" for the empty stack. Returns buf. */
const char *cli_site_name(const struct snapshot *snap, uint32_t stack, size_t frames, char *buf,
                          size_t len);
/* A stack as one line of frame texts (each escaped for a terminal, so none holds a control
 * character) joined by `sep`, outermost first when outer_first is true. malloc'd; NULL when host
 * memory runs out. Used to compare stacks across files and for folded stacks. */
char *cli_stack_line(const struct snapshot *snap, uint32_t stack, const char *sep,
                     bool outer_first);

/* Progress of long work, on stderr only when it is a terminal. */
struct cli_progress {
    bool enabled;
    const char *what;
    int last_percent;
};
void cli_progress_begin(struct cli_progress *p, const char *what);
void cli_progress_update(struct cli_progress *p, size_t done, size_t total);
void cli_progress_end(struct cli_progress *p);

/* JSON output goes through the snapshot module's JSON emitter, writing onto `out`: one JSON
 * writer in the project. NULL (after a message) when host memory ran out. */
struct emitter *cli_json_open(FILE *out);
/* Ends the output with a newline, flushes and frees; false when a write failed or the value was
 * left unbalanced. NULL is a failure. */
bool cli_json_close(struct emitter *e);
/* A stack as a list of frame objects {"name", "filename", "line"}, innermost first. */
void cli_json_frames(struct emitter *e, const struct snapshot *snap, uint32_t stack);
/* A string value from outside: undecodable bytes as \xHH (text_escape.h), so the output is
 * valid UTF-8 whatever a snapshot holds; NULL is written as "". */
void cli_json_string(struct emitter *e, const char *s);
/* A key and its string value in the dict being written (through cli_json_string). */
static inline void
cli_json_key_string(struct emitter *e, const char *key, const char *value)
{
    emitter_key(e, key);
    cli_json_string(e, value);
}
static inline void
cli_json_key_u64(struct emitter *e, const char *key, uint64_t value)
{
    emitter_key(e, key);
    emitter_u64(e, value);
}
static inline void
cli_json_key_int(struct emitter *e, const char *key, int64_t value)
{
    emitter_key(e, key);
    emitter_int(e, value);
}

/* Parses a non-negative integer option value; false on garbage. */
bool cli_parse_u64(const char *text, uint64_t *value);

/* Parses a size in bytes: digits with an optional fraction and unit, case-insensitive, no space
 * needed: B; K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024; KB, MB, GB, TB powers of 1000
 * ("300M", "300MiB", "1.5GiB", "80GB", "4096"). The result is rounded down to a whole byte;
 * false on garbage, a negative number or more than 2^63 bytes. */
bool cli_parse_size(const char *text, uint64_t *bytes);

/* What cli_parse_size accepts, for error messages. */
#define CLI_SIZE_ACCEPTED                                                                          \
    "a size such as 4096, 300M, 300MiB or 1.5GiB (K, M, G and KiB, MiB, GiB are powers of 1024; "  \
    "KB, MB, GB of 1000)"

#endif
