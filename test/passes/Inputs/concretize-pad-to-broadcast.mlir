// Input of ../concretize.mlir. nvFuser's pad-to-broadcast example: pad a [?, 3, 2, 5, 6]
// tensor by (0,-1),(-4,0),(1,1),(-1,-1) (F.pad order: last dim first) and multiply with a
// [?,?,?,?,?] tensor. Dims 1 and 3 pad to extent 1 and must broadcast in the mul.
func.func @pad_to_broadcast(%x: !fuser.tensor<?x?x?x?x?xf32>, %y: !fuser.tensor<?x?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?x?xf32> {
  %zero = arith.constant 0.0 : f64
  %p = fuser.pad %x [0:0, -1:-1, 1:1, -4:0, 0:-1] value %zero : (!fuser.tensor<?x?x?x?x?xf32>, f64) -> !fuser.tensor<?x?x?x?x?xf32>
  %m = fuser.binary mul %p, %y : (!fuser.tensor<?x?x?x?x?xf32>, !fuser.tensor<?x?x?x?x?xf32>) -> !fuser.tensor<?x?x?x?x?xf32>
  func.return %m : !fuser.tensor<?x?x?x?x?xf32>
}
