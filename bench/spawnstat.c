/*
 * spawnstat: the benchmark's measuring parent (bench/measure.py compiles it into build/bench/ on first use).
 *
 * Owns: running one command and reporting what it alone cost: `spawnstat REPORT -- ARGV...` forks, execs ARGV and
 * writes "<peak RSS KiB> <user us> <system us> <wall ns>" to REPORT: the child's figures from wait4 (it and whatever
 * it waited for), the wall from just before the fork to just after the reaping. Unlike GNU time, whose own exec,
 * dynamic loading and locale set-up (about 1 ms) land in the CPU and wall a harness reads from wait4 around it, this
 * parent's own start-up is in no figure. Forked from this small process, the child's peak RSS is its own (Linux
 * carries a process's peak across exec). The exit status is the child's (128 + N when signal N ended it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fputs("usage: spawnstat REPORT -- ARGV...\n", stderr);
        return 125;
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid = fork();
    if (pid < 0) {
        perror("spawnstat: fork");
        return 125;
    }
    if (pid == 0) {
        execvp(argv[3], argv + 3);
        perror("spawnstat: exec");
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("spawnstat: wait4");
            return 125;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    long long wall = (long long)(end.tv_sec - start.tv_sec) * 1000000000LL + (end.tv_nsec - start.tv_nsec);
    FILE *report = fopen(argv[1], "w");
    if (report == NULL) {
        perror("spawnstat: report");
        return 125;
    }
    fprintf(report, "%ld %lld %lld %lld\n", usage.ru_maxrss,
            (long long)usage.ru_utime.tv_sec * 1000000LL + usage.ru_utime.tv_usec,
            (long long)usage.ru_stime.tv_sec * 1000000LL + usage.ru_stime.tv_usec, wall);
    if (fclose(report) != 0) {
        perror("spawnstat: report");
        return 125;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
