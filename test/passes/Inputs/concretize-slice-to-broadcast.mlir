// Input of ../concretize.mlir. Rows %lo:%hi of x from scalar inputs: one row (extent 1 →
// broadcast: the add then takes y's extent) or several (iteration: y must match).
func.func @slice_rows(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>, %lo: i64, %hi: i64) -> !fuser.tensor<?x?xf32> {
  %n = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %rows = fuser.slice %x [%lo:%hi:1, 0:%n:1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %r = fuser.binary add %rows, %y : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %r : !fuser.tensor<?x?xf32>
}
