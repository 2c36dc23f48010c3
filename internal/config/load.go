package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Load returns Default(), with docker_host from $DOCKER_HOST when set, then
// the file at path (none when path is ""), validated. The file is decoded
// strictly: an unknown key or a value of the wrong type is an error that
// names the key, the value and the line.
func Load(path string) (Config, error) {
	return load(path, nil, os.Getenv)
}

// Reload is Load followed by the flags that were set on fs (the FlagSet
// FromArgs returned), for SIGHUP: the command line keeps overriding the
// file. On error the caller keeps its running Config; Diff says which of
// the changes need a restart.
func Reload(path string, fs *flag.FlagSet) (Config, error) {
	return load(path, fs, os.Getenv)
}

// FromArgs parses the arguments of "ddiskqos run" on a FlagSet of
// RegisterFlags, then does what FromFlags does. It returns the FlagSet for
// Reload. For -h or --help it returns flag.ErrHelp (the help is
// cmd/ddiskqos's, with every command's); it writes nothing, every error is
// the caller's to print (all are usage errors).
func FromArgs(args []string) (Config, *flag.FlagSet, error) {
	return fromArgs(args, os.Getenv)
}

func fromArgs(args []string, getenv func(string) string) (Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	def := Default()
	def.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, fs, err
		}
		return Config{}, fs, fmt.Errorf("%w (ddiskqos run -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fs, fmt.Errorf("unexpected argument %q: run takes flags only", fs.Arg(0))
	}
	c, err := load(ConfigPath(fs), fs, getenv)
	return c, fs, err
}

// FromFlags loads the file named by --config on fs (a parsed FlagSet of
// RegisterFlags), applies the flags the user set over it and validates the
// result.
func FromFlags(fs *flag.FlagSet) (Config, error) {
	return load(ConfigPath(fs), fs, os.Getenv)
}

// ConfigPath returns the value of --config on fs.
func ConfigPath(fs *flag.FlagSet) string {
	if f := fs.Lookup(configFlag); f != nil {
		return f.Value.String()
	}
	return ""
}

// load stacks the layers: defaults, environment, file, flags; then
// validates. Errors from the file stop before validation: a key with a bad
// value kept its default, and errors about that default would mislead.
func load(path string, fs *flag.FlagSet, getenv func(string) string) (Config, error) {
	c := Default()
	o := &origins{file: path, flags: setFlags(fs), env: map[string]string{}}
	if path != "" {
		b, err := readFile(path)
		if err != nil {
			return Config{}, err
		}
		lines, err := decode(b, path, &c)
		if err != nil {
			return Config{}, err
		}
		o.lines = lines
	}
	if fs != nil {
		if err := c.ApplyFlags(fs); err != nil {
			return Config{}, err
		}
	}
	if c.DockerHost == "" {
		if h := getenv("DOCKER_HOST"); h != "" {
			c.DockerHost = h
			o.env["docker_host"] = "$DOCKER_HOST"
		} else {
			c.DockerHost = DefaultDockerHost
		}
	}
	if err := annotate(c.Validate(), o); err != nil {
		return Config{}, err
	}
	return c, nil
}

// readFile reads a config file, which must be a regular file. It is
// opened without blocking and checked before it is read: a FIFO (or a
// device) would block the start, or a SIGHUP's reload and with it every
// later one, for ever.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("config file %s: is a %s, not a regular file", path, fileKind(st.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("config file %s: larger than %d bytes; not a ddiskqos config", path, maxFileSize)
	}
	return b, nil
}

// fileKind names a file's type for an error.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	default:
		return "special file (" + m.Type().String() + ")"
	}
}
