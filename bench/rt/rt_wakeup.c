/* Wake-up lateness of a SCHED_FIFO thread sleeping to absolute 1 ms deadlines
 * (the delay line's own pattern, links/delayline): with nothing else at its
 * priority, what delays it is the kernel (a task inside a non-preemptible
 * section under preempt=none) or the hypervisor (steal). Usage: PRIO COUNT. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
#include <sys/mman.h>
static int cmp(const void *a, const void *b){int64_t x=*(int64_t*)a,y=*(int64_t*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){int prio=atoi(argv[1]);int n=atoi(argv[2]);
struct sched_param sp={.sched_priority=prio}; if(sched_setscheduler(0,SCHED_FIFO,&sp)){perror("sched");return 1;}
mlockall(MCL_CURRENT|MCL_FUTURE);
int64_t *lat=malloc(sizeof(int64_t)*n); struct timespec t,now; clock_gettime(CLOCK_MONOTONIC,&t);
for(int i=0;i<n;i++){t.tv_nsec+=1000000; if(t.tv_nsec>=1000000000){t.tv_nsec-=1000000000;t.tv_sec++;}
clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&t,NULL); clock_gettime(CLOCK_MONOTONIC,&now);
lat[i]=(now.tv_sec-t.tv_sec)*1000000000LL+(now.tv_nsec-t.tv_nsec);}
qsort(lat,n,sizeof(int64_t),cmp); int over1=0,over2=0; for(int i=0;i<n;i++){if(lat[i]>1000000)over1++; if(lat[i]>2000000)over2++;}
printf("prio %d n %d: p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms; >1ms %d, >2ms %d\n",prio,n,lat[n/2]/1e6,lat[n*99/100]/1e6,lat[n*999/1000]/1e6,lat[n-1]/1e6,over1,over2);}
