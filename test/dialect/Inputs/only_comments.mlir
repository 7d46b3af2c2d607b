// Only comments: an empty module, as in mlir-opt.

// (nothing else)
