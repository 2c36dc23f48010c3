// Command ddiskqos gives every container on a host disk-I/O quality of service.
package main

import (
	"fmt"
	"os"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fmt.Fprintln(os.Stderr, "ddiskqos: no subcommand yet")
	return 2
}
