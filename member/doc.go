// Package member is cohort's consistent membership service: the radix-tree
// view-change protocol of Varma et al. (ICS'06). The full documentation is
// being written; see DESIGN.md, "Membership".
package member
