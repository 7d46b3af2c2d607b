// Input of ../concretize.mlir. Layer-norm as frameworks emit it: the weight is broadcast to
// a static 4x8 while x is `?x?`. The static extents are the IR's own: concretize ties x (and
// all that is exactly tied to it) to them in either mode. The weight's `?` is tied only through
// the expand, which may broadcast an extent-1 dim: it becomes `b` in a run where it has extent 1,
// and 8 in a run where it has extent 8 (which expand dims expand is part of the cache key). Must
// not change: y (tied to nothing).
func.func @static_broadcast(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<?xf32>, %y: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<4x8xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<?xf32>) {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %c = fuser.binary sub %x, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %wb = fuser.broadcast_in_dim %w dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %we = fuser.expand %wb : !fuser.tensor<bx?xf32> -> !fuser.tensor<4x8xf32>
  %o = fuser.binary mul %c, %we : (!fuser.tensor<?x?xf32>, !fuser.tensor<4x8xf32>) -> !fuser.tensor<4x8xf32>
  %e = fuser.unary exp %y : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %n = fuser.dim %c, 1 : !fuser.tensor<?x?xf32>
  %zero = arith.constant 0.000000e+00 : f64
  %z = fuser.full(%n) value %zero : (f64) -> !fuser.tensor<?xf32>
  func.return %o, %e, %z : !fuser.tensor<4x8xf32>, !fuser.tensor<?x?xf32>, !fuser.tensor<?xf32>
}
