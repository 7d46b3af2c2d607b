"""Segmentation: groups of ops that one scheduler unit accepts (segment, segment_pass for
`fuser-opt -p segment`), the segment-set boundaries, host segments (matmul/linear) and the
symbolic extents the groups are checked with."""
