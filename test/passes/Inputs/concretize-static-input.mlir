// Input of ../concretize.mlir. A static input extent (the hidden size of w) ties x's dim 1
// through a broadcast; x's batch dim is tied to no static extent and stays `?`, so the
// kernels serve every batch size.
func.func @static_input(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<8xf32>) -> !fuser.tensor<?x?xf32> {
  %wb = fuser.broadcast %w dims [0] : !fuser.tensor<8xf32> -> !fuser.tensor<bx8xf32>
  %a = fuser.binary add %x, %wb : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx8xf32>) -> !fuser.tensor<?x8xf32>
  %r = fuser.unary relu %a : !fuser.tensor<?x8xf32> -> !fuser.tensor<?x8xf32>
  %b = fuser.binary mul %x, %x : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %o = fuser.binary add %b, %r : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x8xf32>) -> !fuser.tensor<?x8xf32>
  func.return %b : !fuser.tensor<?x?xf32>
}
