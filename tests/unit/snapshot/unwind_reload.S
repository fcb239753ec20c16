/* unwind_reload.S: lib_entry(cb) calls cb from a frame of FRAME bytes. Built twice, with a small
 * frame and a 4 KiB one, into libraries whose lib_entry has the same address and the same
 * instruction lengths, so that cb's return address is the same in both when one is loaded where
 * the other was. Each stores the address of lib_outer (an outermost frame) at DECOY_OFF above its
 * stack pointer: where the other variant's return address would be, so a stack walked with the
 * other variant's rule ends cleanly, wrongly, at lib_outer instead of at lib_entry's caller. */
#if !defined(FRAME) || !defined(DECOY_OFF)
#error FRAME and DECOY_OFF must be defined
#endif
    .text
    .globl lib_entry
    .type lib_entry, @function
lib_entry:
    .cfi_startproc
    .byte 0x48, 0x81, 0xec /* sub $FRAME, %rsp with a 32-bit immediate in both variants */
    .long FRAME
    .cfi_adjust_cfa_offset FRAME
    lea lib_outer+1(%rip), %rax
    mov %rax, DECOY_OFF(%rsp)
    call *%rdi
    .byte 0x48, 0x81, 0xc4 /* add $FRAME, %rsp */
    .long FRAME
    .cfi_adjust_cfa_offset -FRAME
    ret
    .cfi_endproc
    .size lib_entry, .-lib_entry

    .globl lib_outer
    .hidden lib_outer
    .type lib_outer, @function
lib_outer:
    .cfi_startproc
    .cfi_undefined rip
    nop
    nop
    ret
    .cfi_endproc
    .size lib_outer, .-lib_outer
    .section .note.GNU-stack, "", @progbits
