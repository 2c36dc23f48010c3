module github.com/ddiskqos/ddiskqos

go 1.26.8
