package stats

// v1 cpuacct.stat counts in USER_HZ ticks, 100 a second on every Linux
// architecture ddiskqos builds for (the ABI fixes it, whatever HZ is).
const userHZ = 100

func (r *Reader) readCPU(s *Stats, rel string) {
	if s.CgroupVersion == 2 {
		dir, where, ok := r.dir("cpu", rel)
		if !ok {
			s.missing("cpu: cgroup not in %s", where)
			return
		}
		st, err := readFlat(dir, "cpu.stat")
		if err != nil {
			s.missing("cpu: %v", err)
			return
		}
		c := &CPU{}
		u, _ := st.Get("usage_usec")
		us, _ := st.Get("user_usec")
		sy, _ := st.Get("system_usec")
		c.UsageNs, c.UserNs, c.SystemNs = u*1000, us*1000, sy*1000
		if p, ok := st.Get("nr_periods"); ok {
			n, _ := st.Get("nr_throttled")
			tu, _ := st.Get("throttled_usec")
			c.Throttling = &Throttling{Periods: p, Throttled: n, ThrottledNs: tu * 1000}
		} else {
			s.missing("cpu throttling: the cpu controller is not enabled for %s (cgroup.subtree_control of its parent)", rel)
		}
		if p, err := readPressure(dir, "cpu.pressure"); err == nil {
			c.Pressure = p
		} else {
			s.missing("cpu.pressure: %v", err)
		}
		s.CPU = c
		return
	}
	// v1: time in cpuacct, throttling in cpu (often one mount, cpu,cpuacct).
	var c *CPU
	if dir, where, ok := r.dir("cpuacct", rel); !ok {
		s.missing("cpu usage: cgroup not in %s", where)
	} else if u, _, err := readSingle(dir, "cpuacct.usage"); err != nil {
		s.missing("cpu usage: %v", err)
	} else {
		c = &CPU{UsageNs: u}
		us, _, err1 := readSingle(dir, "cpuacct.usage_user")
		sy, _, err2 := readSingle(dir, "cpuacct.usage_sys")
		if err1 == nil && err2 == nil {
			c.UserNs, c.SystemNs = us, sy
		} else if st, err := readFlat(dir, "cpuacct.stat"); err == nil { // kernels before 4.6
			us, _ := st.Get("user")
			sy, _ := st.Get("system")
			c.UserNs, c.SystemNs = us*(1e9/userHZ), sy*(1e9/userHZ)
		} else {
			s.missing("cpu user/system: %v", err)
		}
	}
	if dir, where, ok := r.dir("cpu", rel); !ok {
		s.missing("cpu throttling: cgroup not in %s", where)
	} else if st, err := readFlat(dir, "cpu.stat"); err != nil {
		s.missing("cpu throttling: %v", err)
	} else {
		if c == nil {
			c = &CPU{}
		}
		p, _ := st.Get("nr_periods")
		n, _ := st.Get("nr_throttled")
		tn, _ := st.Get("throttled_time")
		c.Throttling = &Throttling{Periods: p, Throttled: n, ThrottledNs: tn}
	}
	s.CPU = c
}
