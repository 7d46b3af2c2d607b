// Verifier errors of the input are located like parse errors: file:line:col of the op that
// does not verify (the line of its chunk with --split-input-file), its first line marked.

// RUN: not fuser-opt %S/Inputs/verify_error.mlir 2>&1 | filecheck %s --check-prefix=OP
// RUN: not fuser-opt %S/Inputs/fusion_error.mlir 2>&1 | filecheck %s --check-prefix=FUSION
// RUN: not fuser-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=SPLIT

func.func @fine(%x: !fuser.tensor<1x?xf32>) -> !fuser.tensor<?xf32> {
  %r = fuser.squeeze %x dims [0] : !fuser.tensor<1x?xf32> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}

// -----

func.func @bad(%x: !fuser.tensor<4x?xf32>) -> !fuser.tensor<?xf32> {
  %r = fuser.squeeze %x dims [0] : !fuser.tensor<4x?xf32> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}

// OP-NOT: Traceback
// OP: {{^}}{{.*}}Inputs/verify_error.mlir:2:3{{$}}
// OP-NEXT: {{^}}  %r = fuser.squeeze %x dims [0] : !fuser.tensor<4x?xf32> -> !fuser.tensor<?xf32>{{$}}
// OP-NEXT: {{^  \^+$}}
// OP-NEXT: fuser.squeeze: cannot squeeze dim 0 of [4, ?]: its extent is 4, not 1
// OP-NOT: Traceback

// The fusion-level rules are located at the function.
// FUSION-NOT: Traceback
// FUSION: {{^}}{{.*}}Inputs/fusion_error.mlir:1:1{{$}}
// FUSION-NEXT: {{^}}func.func @bad_output_order(
// FUSION-NEXT: {{^\^+$}}
// FUSION-NEXT: fusion @bad_output_order: required stride order [1, 1] of output 0 is not a permutation
// FUSION-NOT: Traceback

// SPLIT: {{^}}{{.*}}verify_error_locations.mlir:[[# @LINE - 19]]:3{{$}}
// SPLIT-NEXT: %r = fuser.squeeze %x dims [0] : !fuser.tensor<4x?xf32> -> !fuser.tensor<?xf32>
// SPLIT-NEXT: {{^  \^+$}}
// SPLIT-NEXT: fuser.squeeze: cannot squeeze dim 0 of [4, ?]: its extent is 4, not 1
