// Input of ../concretize.mlir. A RoPE-like fusion: x [B, H, S, D], a cos cache [P, D] sliced
// to the sequence length S = dim(x, 2), rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]).
func.func @rope(%x: !fuser.tensor<?x?x?x?xf32>, %cos: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?x?x?xf32> {
  %b = fuser.dim %x, 0 : !fuser.tensor<?x?x?x?xf32>
  %h = fuser.dim %x, 1 : !fuser.tensor<?x?x?x?xf32>
  %s = fuser.dim %x, 2 : !fuser.tensor<?x?x?x?xf32>
  %d = fuser.dim %x, 3 : !fuser.tensor<?x?x?x?xf32>
  %two = arith.constant 2 : i64
  %half = arith.floordivsi %d, %two : i64
  %dc = fuser.dim %cos, 1 : !fuser.tensor<?x?xf32>
  %c = fuser.slice %cos [0:%s:1, 0:%dc:1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %x1 = fuser.slice %x [0:%b:1, 0:%h:1, 0:%s:1, 0:%half:1] : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xf32>
  %x2 = fuser.slice %x [0:%b:1, 0:%h:1, 0:%s:1, %half:%d:1] : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xf32>
  %n = fuser.unary neg %x2 : !fuser.tensor<?x?x?x?xf32> -> !fuser.tensor<?x?x?x?xf32>
  %rot = fuser.cat %n, %x1 dim 3 : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
  %cb = fuser.broadcast_in_dim %c dims [2, 3] : !fuser.tensor<?x?xf32> -> !fuser.tensor<bxbx?x?xf32>
  %xc = fuser.binary mul %x, %cb : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<bxbx?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
  %out = fuser.binary add %xc, %rot : (!fuser.tensor<?x?x?x?xf32>, !fuser.tensor<?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?xf32>
  func.return %out : !fuser.tensor<?x?x?x?xf32>
}
