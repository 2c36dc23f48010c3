package stats

// v1 reports "no limit" as the largest page-aligned long; anything this
// large is no limit in practice.
const v1NoLimit = 1 << 62

func (r *Reader) readMemory(s *Stats, rel string) {
	dir, where, ok := r.dir("memory", rel)
	if !ok {
		s.missing("memory: cgroup not in %s", where)
		return
	}
	m := &Memory{}
	if s.CgroupVersion == 2 {
		u, _, err := readSingle(dir, "memory.current")
		if err != nil {
			s.missing("memory: %v", err)
			return
		}
		m.UsageBytes = u
		if p, _, err := readSingle(dir, "memory.peak"); err == nil {
			m.PeakBytes = p
		} else {
			s.missing("memory peak: %v", err)
		}
		if l, unl, err := readSingle(dir, "memory.max"); err == nil && !unl {
			m.LimitBytes = l
		} else if err != nil {
			s.missing("memory limit: %v", err)
		}
		if st, err := readFlat(dir, "memory.stat"); err == nil {
			m.CacheBytes, _ = st.Get("file")
			m.AnonBytes, _ = st.Get("anon")
			m.PgFault, _ = st.Get("pgfault")
			m.PgMajFault, _ = st.Get("pgmajfault")
		} else {
			s.missing("memory stat: %v", err)
		}
		if ev, err := readFlat(dir, "memory.events"); err == nil {
			m.OOMKills, _ = ev.Get("oom_kill")
		} else {
			s.missing("memory events: %v", err)
		}
		if p, err := readPressure(dir, "memory.pressure"); err == nil {
			m.Pressure = p
		} else {
			s.missing("memory.pressure: %v", err)
		}
		s.Memory = m
		return
	}
	u, _, err := readSingle(dir, "memory.usage_in_bytes")
	if err != nil {
		s.missing("memory: %v", err)
		return
	}
	m.UsageBytes = u
	if p, _, err := readSingle(dir, "memory.max_usage_in_bytes"); err == nil {
		m.PeakBytes = p
	}
	if l, _, err := readSingle(dir, "memory.limit_in_bytes"); err == nil && l < v1NoLimit {
		m.LimitBytes = l
	} else if err != nil {
		s.missing("memory limit: %v", err)
	}
	if st, err := readFlat(dir, "memory.stat"); err == nil {
		// total_*: the cgroup and its children (a container's init and
		// its children may sit in child cgroups).
		m.CacheBytes, _ = st.Get("total_cache")
		m.AnonBytes, _ = st.Get("total_rss")
		m.PgFault, _ = st.Get("total_pgfault")
		m.PgMajFault, _ = st.Get("total_pgmajfault")
	} else {
		s.missing("memory stat: %v", err)
	}
	if oc, err := readFlat(dir, "memory.oom_control"); err == nil {
		m.OOMKills, _ = oc.Get("oom_kill")
	}
	s.Memory = m
}
