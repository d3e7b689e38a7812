package stage

import "syscall"

const noFollow = syscall.O_NOFOLLOW
