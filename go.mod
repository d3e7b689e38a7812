module github.com/cohort-mp/cohort

go 1.26
