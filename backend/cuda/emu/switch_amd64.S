//go:build cudaemu

// emu_switch(void **from, void *to): the emulator's fiber switch. It saves
// the callee-saved registers and the floating-point control words (MXCSR,
// x87) on the current stack, stores the stack pointer in *from, and
// resumes the stack saved at to (by emu_switch, or made by runtime.cpp's
// start_stack) by restoring the same and returning there.
	.text
	.globl emu_switch
	.type emu_switch, @function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size emu_switch, .-emu_switch
	.section .note.GNU-stack,"",@progbits
