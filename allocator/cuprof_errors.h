/* cuprof_errors.h: the project's own negative error codes (positive codes are CUDA's, passed up),
 *   defined here and nowhere else (see CODING_STYLE.md; cuprof.h has the public API's).
 * Locking: none (constants only).
 * Hot path: yes. */
#ifndef CUPROF_ERRORS_H
#define CUPROF_ERRORS_H

/* Internal functions return 0 on success, -CUPROF_E* for cuprof's own failures, or a positive
 * error code that came from the device backend (a CUresult/cudaError_t), handed up unchanged. */
enum cuprof_error {
    CUPROF_OK = 0,
    CUPROF_ENOMEM = 1,    /* device out of memory after every retry (PyTorch's OOM) */
    CUPROF_EINVAL = 2,    /* bad argument or bad configuration value */
    CUPROF_ENOTOWNED = 3, /* pointer is not one the allocator handed out */
    CUPROF_EHOSTMEM = 4,  /* host malloc failed (cuprof's own bookkeeping) */
    CUPROF_EIO = 5,       /* file could not be read or written */
    CUPROF_EFORMAT = 6,   /* input file is not in the expected format */
    /* The device said success with a value that cannot be right (a NULL, misaligned, wrapping
     * or overlapping allocation): the caller keeps cuprof out of that request. */
    CUPROF_EDRIVER = 7,
    /* allocator_malloc_cached: the cache cannot serve the request without the device. */
    CUPROF_EUNCACHED = 8,
};

#endif
