// Without --parsing-diagnostics / --verify-diagnostics, bad input makes fuser-opt exit
// non-zero (`not`) with a located message on stderr, and never a Python traceback.

// RUN: not fuser-opt %s 2>&1 | filecheck %s --check-prefix=PARSE
// RUN: not fuser-opt %S/Inputs/verify_error.mlir 2>&1 | filecheck %s --check-prefix=VERIFY
// RUN: not fuser-opt %S/Inputs/fusion_error.mlir 2>&1 | filecheck %s --check-prefix=FUSION
// RUN: not fuser-opt %S/Inputs/constraint_error.mlir 2>&1 | filecheck %s --check-prefix=CONSTRAINT
// RUN: not fuser-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS

func.func @bad_dtype(%x: !fuser.tensor<?xf99>) {
  func.return
}

// A parse error: file, line and column, the line, a marker under the bad text.
// PARSE-NOT: Traceback
// PARSE: errors_without_flags.mlir:[[# @LINE - 6]]:39
// PARSE-NEXT: func.func @bad_dtype(%x: !fuser.tensor<?xf99>) {
// PARSE-NEXT: {{^ +}}^^^^^^^{{$}}
// PARSE-NEXT: 'f99' is not an element type
// PARSE-NOT: Traceback

// A verifier error: the message, then the IR with the failing op marked.
// VERIFY-NOT: Traceback
// VERIFY: fuser.squeeze: cannot squeeze dim 0 of [4, ?]: its extent is 4, not 1
// VERIFY: %r = "fuser.squeeze"(%x)
// VERIFY-NEXT: ^^^^^^^^^^^^^^^^^^^
// VERIFY-NOT: Traceback

// FUSION-NOT: Traceback
// FUSION: fusion @bad_output_order: required stride order [1, 1] of output 0 is not a permutation of its 2 dims (f32[?, 4])
// FUSION-NOT: Traceback

// An op's operand constraint, checked while parsing: located at the op.
// CONSTRAINT-NOT: Traceback
// CONSTRAINT: constraint_error.mlir:2:3
// CONSTRAINT-NEXT: %r = fuser.unary exp %x : tensor<?xf32> -> !fuser.tensor<?xf32>
// CONSTRAINT: tensor<?xf32> should be of base attribute fuser.tensor
// CONSTRAINT-NOT: Traceback

// PASS-NOT: Traceback
// PASS: no-such-pass
// PASS-NOT: Traceback
