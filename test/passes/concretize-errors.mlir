// `concretize` errors: extents that disagree at run time, a missing scalar, a pad that crops
// more than the extent, malformed options. Inputs are under Inputs/ (see concretize.mlir).
//
// RUN: not fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6;8x7x5x9x5"}' 2>&1 | filecheck %s --check-prefix=ERR-MISMATCH
// RUN: not fuser-opt %S/Inputs/concretize-slice-to-broadcast.mlir -p 'concretize{extents="6x5;7x5" scalars="1,4"}' 2>&1 | filecheck %s --check-prefix=ERR-ROWS
// RUN: not fuser-opt %S/Inputs/concretize-ssa-widths.mlir -p 'concretize{extents="4x10"}' 2>&1 | filecheck %s --check-prefix=ERR-SCALAR
// RUN: not fuser-opt %S/Inputs/concretize-ssa-widths.mlir -p 'concretize{extents="4x10" scalars="-6"}' 2>&1 | filecheck %s --check-prefix=ERR-CROP
// RUN: not fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize' 2>&1 | filecheck %s --check-prefix=ERR-NO-EXTENTS
// RUN: not fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6"}' 2>&1 | filecheck %s --check-prefix=ERR-COUNT
// RUN: not fuser-opt %S/Inputs/concretize-pad-to-broadcast.mlir -p 'concretize{extents="8x3x2x5x6;8x?x4x9x5"}' 2>&1 | filecheck %s --check-prefix=ERR-SYNTAX
// RUN: not fuser-opt %S/Inputs/concretize-ssa-widths.mlir -p 'concretize{extents="4x10" scalars="two"}' 2>&1 | filecheck %s --check-prefix=ERR-SCALAR-SYNTAX
// An input dim tied to a static extent of the IR is checked first, naming the input, the dim,
// both extents and what it is tied to.
// RUN: not fuser-opt %S/Inputs/concretize-static-broadcast.mlir -p 'concretize{extents="4x9;9;3x5"}' 2>&1 | filecheck %s --check-prefix=ERR-STATIC
// RUN: not fuser-opt %S/Inputs/concretize-static-input.mlir -p 'concretize{extents="3x7;8"}' 2>&1 | filecheck %s --check-prefix=ERR-STATIC-IN

// ERR-MISMATCH: fuser-opt: error: fuser.binary mul: dim 2 has extents 4 and 5 at run time, which neither match nor broadcast
// ERR-ROWS: fuser-opt: error: fuser.binary add: dim 0 has extents 3 and 7 at run time, which neither match nor broadcast
// ERR-SCALAR: fuser-opt: error: fuser.pad: the left pad width of dim 1 depends on a scalar input that was given no value
// ERR-CROP: fuser-opt: error: fuser.pad: dim 1 of extent 10 padded by (-6, -22) at run time has negative extent -18
// ERR-NO-EXTENTS: fuser-opt: error: concretize: input 0 (f32[?, ?, ?, ?, ?]), input 1 (f32[?, ?, ?, ?, ?]) have dynamic extents; give the shape of every tensor input with extents="AxB;C"
// ERR-COUNT: fuser-opt: error: concretize: extents="8x3x2x5x6" gives 1 shape(s) but the fusion has 2 tensor input(s) (f32[?, ?, ?, ?, ?], f32[?, ?, ?, ?, ?])
// ERR-SYNTAX: fuser-opt: error: concretize: extents entry "8x?x4x9x5" for input 1 is not `x`-separated non-negative integers
// ERR-SCALAR-SYNTAX: fuser-opt: error: concretize: scalar value "two" is not an integer, float, true, false or _
// ERR-STATIC: fuser-opt: error: input 0 (f32[?, ?]) dim 1 has extent 9 but the fusion needs 8: the dim is tied to fuser.expand -> f32[4, 8], dim 1
// ERR-STATIC-IN: fuser-opt: error: input 0 (f32[?, ?]) dim 1 has extent 7 but the fusion needs 8: the dim is tied to input 1 (f32[8]) dim 0
