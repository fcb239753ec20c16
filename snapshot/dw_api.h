/* dw_api.h: the libdw/libdwfl functions the symbolizer calls, resolved from
 *   dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL) once, so libcuprof.so never links libdw.
 * Locking: the load runs once under pthread_once; the table is read-only afterwards.
 * Hot path: no (first symbolizer_create, at dump time). */
#ifndef CUPROF_DW_API_H
#define CUPROF_DW_API_H

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <libelf.h>

/* Every libdw function cuprof calls, written once: X(name). Add a call here before using it. */
#define DW_API_FUNCTIONS(X)                                                                        \
    X(dwfl_begin)                                                                                  \
    X(dwfl_end)                                                                                    \
    X(dwfl_report_begin)                                                                           \
    X(dwfl_report_begin_add)                                                                       \
    X(dwfl_report_end)                                                                             \
    X(dwfl_linux_proc_report)                                                                      \
    X(dwfl_report_elf)                                                                             \
    X(dwfl_linux_proc_find_elf)                                                                    \
    X(dwfl_build_id_find_debuginfo)                                                                \
    X(dwfl_module_build_id)                                                                        \
    X(dwelf_elf_gnu_build_id)                                                                      \
    X(elf_begin)                                                                                   \
    X(elf_end)                                                                                     \
    X(dwfl_addrmodule)                                                                             \
    X(dwfl_module_info)                                                                            \
    X(dwfl_module_getsrc)                                                                          \
    X(dwfl_lineinfo)                                                                               \
    X(dwfl_module_addrdie)                                                                         \
    X(dwfl_module_addrname)                                                                        \
    X(dwarf_attr)                                                                                  \
    X(dwarf_attr_integrate)                                                                        \
    X(dwarf_formstring)                                                                            \
    X(dwarf_formudata)                                                                             \
    X(dwarf_getsrcfiles)                                                                           \
    X(dwarf_filesrc)                                                                               \
    X(dwarf_child)                                                                                 \
    X(dwarf_siblingof)                                                                             \
    X(dwarf_haschildren)                                                                           \
    X(dwarf_tag)                                                                                   \
    X(dwarf_ranges)                                                                                \
    X(dwarf_dieoffset)                                                                             \
    X(dwarf_offdie)                                                                                \
    X(dwarf_cu_getdwarf)

/* One pointer per function, typed from libdw's own prototype. */
#define DW_API_FIELD(name) __typeof__(name) *name;
struct dw_api {
    DW_API_FUNCTIONS(DW_API_FIELD)
};
#undef DW_API_FIELD

/* The table, loaded on the first call; NULL when libdw.so.1 is missing or lacks one of the
 * functions (the symbolizer then falls back to dladdr). Logs nothing. */
const struct dw_api *dw_api_get(void);

/* Test hook: load `soname` instead of "libdw.so.1" (a name that does not exist forces the
 * fallback). Effective only before the first dw_api_get; returns -1 if that already ran. */
__attribute__((warn_unused_result)) int dw_api_set_soname(const char *soname);

#endif
