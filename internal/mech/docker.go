package mech

// DockerWeight is Docker's container-wide blkio weight, 10..1000, set
// through the Engine API ("docker update --blkio-weight"); the Docker
// actuator (internal/actuate/docker.go) is its driver, it writes no cgroup
// file. Its originals are keyed by container id; their value is the weight
// the container had ("": none, HostConfig.BlkioWeight 0).
const DockerWeight Name = "docker-blkio-weight"

var dockerWeight = Mech{Name: DockerWeight, Knob: "docker-blkio-weight", Role: Weight}
