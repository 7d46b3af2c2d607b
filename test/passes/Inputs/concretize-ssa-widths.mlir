// Input of ../concretize.mlir. Pad widths computed at run time from a scalar input and a
// `fuser.dim` query: left = %w, right = 2 * %w - dim(x, 1) (negative: crops).
func.func @ssa_widths(%x: !fuser.tensor<?x?xf32>, %w: i64) -> !fuser.tensor<?x?xf32> {
  %zero = arith.constant 0.0 : f64
  %two = arith.constant 2 : i64
  %n = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %ww = arith.muli %w, %two : i64
  %r = arith.subi %ww, %n : i64
  %p = fuser.pad %x [0:0, %w:%r] value %zero : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %p : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %e : !fuser.tensor<?x?xf32>
}
