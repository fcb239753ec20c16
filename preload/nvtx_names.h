/* nvtx_names.h: the texts of NVTX events as cuprof labels them: an event's message (ASCII, wide
 *   characters as UTF-8, or a registered string), prefixed "domain:" in a domain of its own (as
 *   Nsight Systems names them); NVTX's domain and registered-string handles.
 * Locking: creating a domain or registering a string takes one private mutex (rare calls); reading
 *   a handle's text takes none (handles are never freed: NVTX allows their use until exit).
 * Hot path: nvtx_names_event is (no lock, no malloc; ASCII in the default domain is not copied). */
#ifndef CUPROF_NVTX_NAMES_H
#define CUPROF_NVTX_NAMES_H

#include <stddef.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

/* Longest label text kept (longer messages are cut at a UTF-8 character boundary). */
#define NVTX_NAMES_MAX 1024

/* The handle of the domain named `name` (UTF-8; one handle per name), or NULL when out of
 * memory: NVTX then treats the calls as the default domain's. */
nvtxDomainHandle_t nvtx_names_domain(const char *name);

/* A registered string's handle (its UTF-8 copy), or NULL when out of memory or past 64 MiB of
 * registered text (a NULL handle's events are labelled with the empty text). */
nvtxStringHandle_t nvtx_names_register(const char *text);

/* Wide characters (UTF-32, as Linux's wchar_t) as UTF-8 into out (cap >= 1, always terminated,
 * cut at a character boundary). Characters that are not Unicode scalar values become U+FFFD. */
void nvtx_names_utf8(const wchar_t *w, char *out, size_t cap);

/* The label text of a message of `type` (nvtxMessageType_t) in `domain` (NULL: the default):
 * either the message itself or its text composed in buf (cap NVTX_NAMES_MAX). A missing message
 * is the empty text. */
const char *nvtx_names_message(nvtxDomainHandle_t domain, int32_t type,
                               const nvtxMessageValue_t *message, char *buf, size_t cap);

/* The same for an event's attributes (NULL, or too small to hold a message: no message). */
const char *nvtx_names_event(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr,
                             char *buf, size_t cap);

/* In the child after fork(): re-initialises the mutex another thread may have held. */
void nvtx_names_reset_after_fork(void);

#endif
