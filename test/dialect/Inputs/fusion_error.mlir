func.func @bad_output_order(%x: !fuser.tensor<?x4xf32>) -> (!fuser.tensor<?x4xf32> {fuser.stride_order = array<i64: 1, 1>}) {
  func.return %x : !fuser.tensor<?x4xf32>
}
