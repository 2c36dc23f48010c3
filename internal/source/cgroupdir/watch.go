package cgroupdir

// inotify on the directories the walk goes through: each event only triggers a rescan.

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher is an inotify instance watching a set of directories. Events
// are not decoded: any of them only means "rescan now".
type watcher struct {
	fd      int
	file    *os.File // the fd, non-blocking, so Read parks in the runtime poller and Close wakes it
	ch      chan struct{}
	wg      sync.WaitGroup
	watches map[string]int // directory -> watch descriptor, as of the last arm
}

// watchMask: a child made, removed, or renamed in or out; the directory
// itself removed or moved (the rescan then finds it gone and re-arms).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &watcher{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), ch: make(chan struct{}, 1), watches: map[string]int{}}
	w.wg.Add(1)
	go w.read()
	return w, nil
}

func (w *watcher) read() {
	defer w.wg.Done()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return // closed
		}
		if n > 0 {
			select {
			case w.ch <- struct{}{}:
			default: // a rescan is already pending; it will see this change too
			}
		}
	}
}

// arm (re)adds a watch on every directory of dirs and forgets the others
// (the kernel drops the watch of a removed directory by itself). Adding a
// watch that is in place returns its descriptor again; a new descriptor
// means a directory that was not watched (new, or made again: a new
// inode), reported as fresh. watched is whether parent is watched. A
// directory that vanished in between is no error: the next scan sees it
// gone.
func (w *watcher) arm(parent string, dirs []string) (watched, fresh bool) {
	next := make(map[string]int, len(dirs))
	for _, d := range dirs {
		wd, err := unix.InotifyAddWatch(w.fd, d, watchMask)
		if err != nil {
			continue
		}
		next[d] = wd
		if old, ok := w.watches[d]; !ok || old != wd {
			fresh = true
		}
	}
	w.watches = next
	_, watched = next[parent]
	return watched, fresh
}

// changed returns the channel that fires after inotify events; nil (never
// fires) when there is no watcher.
func (w *watcher) changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.ch
}

func (w *watcher) close() {
	w.file.Close()
	w.wg.Wait()
}
