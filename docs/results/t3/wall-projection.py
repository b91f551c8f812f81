#!/usr/bin/env python3
"""Projection (not a measurement) of the all-GPU Table 8.2 set's wall time with
`nmcp t3 --jobs 2` after the part scheduling of emulator/src/t3/plan.rs.

Part CPU-s = the group's CPU-s in the last measured full run (1,956 CPU-s, split over
the groups in the proportions measured before: docs/results/t3/README.md) x the part's
share of the T-NLG TP 8 group measured per part (NMCP_T3_PART_TIMES=1, wall seconds on a
loaded machine). Priorities = `t3::plan::part_cost` for every part of the set (printed
by a throwaway test calling it; COSTS below). List scheduling on 2 threads with T3-MCA
after its GEMM, as `run_study` does.
"""
COSTS = """
COST mega-gpt-2 8 OP Gemm 5371428.571428573
COST mega-gpt-2 8 OP T3 16108846.811428573
COST mega-gpt-2 8 OP T3Mca 16108846.811428573
COST mega-gpt-2 8 OP Ring(ReduceScatter) 10769418.24
COST mega-gpt-2 8 OP Ring(ReduceScatterNmc) 10769418.24
COST mega-gpt-2 8 OP Ring(AllGather) 10769418.24
COST mega-gpt-2 8 FC-2 Gemm 21005714.28571429
COST mega-gpt-2 8 FC-2 T3 31743132.525714293
COST mega-gpt-2 8 FC-2 T3Mca 31743132.525714293
COST mega-gpt-2 8 FC-2 Ring(ReduceScatter) 10769418.24
COST mega-gpt-2 8 FC-2 Ring(ReduceScatterNmc) 10769418.24
COST mega-gpt-2 8 FC-2 Ring(AllGather) 10769418.24
COST mega-gpt-2 8 IP Gemm 15794285.714285716
COST mega-gpt-2 8 IP T3 26531703.95428572
COST mega-gpt-2 8 IP T3Mca 26531703.95428572
COST mega-gpt-2 8 IP Ring(ReduceScatter) 10769418.24
COST mega-gpt-2 8 IP Ring(ReduceScatterNmc) 10769418.24
COST mega-gpt-2 8 IP Ring(AllGather) 10769418.24
COST mega-gpt-2 16 OP Gemm 5531428.571428573
COST mega-gpt-2 16 OP T3 27006265.05142857
COST mega-gpt-2 16 OP T3Mca 27006265.05142857
COST mega-gpt-2 16 OP Ring(ReduceScatter) 21602836.48
COST mega-gpt-2 16 OP Ring(ReduceScatterNmc) 21602836.48
COST mega-gpt-2 16 OP Ring(AllGather) 21602836.48
COST mega-gpt-2 16 FC-2 Gemm 21165714.28571429
COST mega-gpt-2 16 FC-2 T3 42640550.76571429
COST mega-gpt-2 16 FC-2 T3Mca 42640550.76571429
COST mega-gpt-2 16 FC-2 Ring(ReduceScatter) 21602836.48
COST mega-gpt-2 16 FC-2 Ring(ReduceScatterNmc) 21602836.48
COST mega-gpt-2 16 FC-2 Ring(AllGather) 21602836.48
COST mega-gpt-2 16 IP Gemm 15954285.714285716
COST mega-gpt-2 16 IP T3 37429122.19428572
COST mega-gpt-2 16 IP T3Mca 37429122.19428572
COST mega-gpt-2 16 IP Ring(ReduceScatter) 21602836.48
COST mega-gpt-2 16 IP Ring(ReduceScatterNmc) 21602836.48
COST mega-gpt-2 16 IP Ring(AllGather) 21602836.48
COST t-nlg 8 OP Gemm 5166000.000000001
COST t-nlg 8 OP T3 12603899.093333334
COST t-nlg 8 OP T3Mca 12603899.093333334
COST t-nlg 8 OP Ring(ReduceScatter) 7469899.093333334
COST t-nlg 8 OP Ring(ReduceScatterNmc) 7469899.093333334
COST t-nlg 8 OP Ring(AllGather) 7469899.093333334
COST t-nlg 8 FC-2 Gemm 20328000.000000004
COST t-nlg 8 FC-2 T3 27765899.093333337
COST t-nlg 8 FC-2 T3Mca 27765899.093333337
COST t-nlg 8 FC-2 Ring(ReduceScatter) 7469899.093333334
COST t-nlg 8 FC-2 Ring(ReduceScatterNmc) 7469899.093333334
COST t-nlg 8 FC-2 Ring(AllGather) 7469899.093333334
COST t-nlg 8 IP Gemm 15274000.000000004
COST t-nlg 8 IP T3 22711899.093333337
COST t-nlg 8 IP T3Mca 22711899.093333337
COST t-nlg 8 IP Ring(ReduceScatter) 7469899.093333334
COST t-nlg 8 IP Ring(ReduceScatterNmc) 7469899.093333334
COST t-nlg 8 IP Ring(AllGather) 7469899.093333334
COST t-nlg 16 OP Gemm 5278000.000000001
COST t-nlg 16 OP T3 20153798.186666667
COST t-nlg 16 OP T3Mca 20153798.186666667
COST t-nlg 16 OP Ring(ReduceScatter) 15003798.186666667
COST t-nlg 16 OP Ring(ReduceScatterNmc) 15003798.186666667
COST t-nlg 16 OP Ring(AllGather) 15003798.186666667
COST t-nlg 16 FC-2 Gemm 20440000.000000004
COST t-nlg 16 FC-2 T3 35315798.18666667
COST t-nlg 16 FC-2 T3Mca 35315798.18666667
COST t-nlg 16 FC-2 Ring(ReduceScatter) 15003798.186666667
COST t-nlg 16 FC-2 Ring(ReduceScatterNmc) 15003798.186666667
COST t-nlg 16 FC-2 Ring(AllGather) 15003798.186666667
COST t-nlg 16 IP Gemm 15386000.000000004
COST t-nlg 16 IP T3 30261798.18666667
COST t-nlg 16 IP T3Mca 30261798.18666667
COST t-nlg 16 IP Ring(ReduceScatter) 15003798.186666667
COST t-nlg 16 IP Ring(ReduceScatterNmc) 15003798.186666667
COST t-nlg 16 IP Ring(AllGather) 15003798.186666667
"""
import collections
# measured T-NLG TP8 part wall seconds (nmcp t3 --models t-nlg --tp 8 --jobs 2, loaded machine), user 217.76 s total
meas = {('OP','Gemm'):17.2,('OP','T3'):66.1,('OP','T3Mca'):67.7,
        ('FC-2','Gemm'):25.0,('FC-2','T3'):69.9,('FC-2','T3Mca'):78.6,
        ('IP','Gemm'):10.9,('IP','T3'):72.3,('IP','T3Mca'):77.0,
        ('R','RS'):25.2,('R','NMC'):13.5,('R','AG'):9.2}
tot = sum(meas.values())
frac = {k:v/tot for k,v in meas.items()}
groups = {('mega-gpt-2',8):327,('t-nlg',8):179,('t-nlg',16):514,('mega-gpt-2',16):937}
cost = {}
for line in COSTS.strip().splitlines():
    _,m,tp,sl,part,c = line.split()
    cost[(m,int(tp),sl,part)] = float(c)
tasks = []  # (name, cpu, prio, dep)
for (m,tp),g in groups.items():
    for sl in ['OP','FC-2','IP']:
        gi = len(tasks)
        tail = cost[(m,tp,sl,'T3Mca')]
        tasks.append(((m,tp,sl,'Gemm'), g*frac[(sl,'Gemm')], cost[(m,tp,sl,'Gemm')]+tail, None))
        tasks.append(((m,tp,sl,'T3'), g*frac[(sl,'T3')], cost[(m,tp,sl,'T3')], None))
        tasks.append(((m,tp,sl,'T3Mca'), g*frac[(sl,'T3Mca')], tail, gi))
    for r,key in [('RS','Ring(ReduceScatter)'),('NMC','Ring(ReduceScatterNmc)'),('AG','Ring(AllGather)')]:
        tasks.append(((m,tp,'ring',r), g*frac[('R',r)], cost[(m,tp,'OP',key)], None))
def sim(order_key, workers=2):
    done = {}
    free = [0.0]*workers
    pending = list(range(len(tasks)))
    t_end = {}
    events = []
    import heapq
    ready = [i for i in pending if tasks[i][3] is None]
    blocked = [i for i in pending if tasks[i][3] is not None]
    running = []  # (end, i)
    now = 0.0; idle = workers; mk = 0
    while ready or running or blocked:
        while idle and ready:
            i = max(ready, key=lambda j:(order_key(j), -j)); ready.remove(i)
            heapq.heappush(running,(now+tasks[i][1], i)); idle -= 1
        end,i = heapq.heappop(running); now = end; idle += 1; mk = now
        for b in list(blocked):
            if tasks[b][3]==i: blocked.remove(b); ready.append(b)
    return mk
total = sum(t[1] for t in tasks)
print("total CPU-s %.0f, ideal/2 %.0f s, largest part %.0f s %s" % (total, total/2, max(t[1] for t in tasks), max(tasks,key=lambda t:t[1])[0]))
print("a-priori LPT makespan: %.0f s = %.1f min" % (sim(lambda j: tasks[j][2]), sim(lambda j: tasks[j][2])/60))
print("index order (no priority) makespan: %.0f s" % sim(lambda j: -j))
print("oracle LPT (true cpu): %.0f s" % sim(lambda j: tasks[j][1] + (max([t[1] for t in tasks if t[3]==j] or [0]))))
for s in [1.0, 0.9, 0.85]:
    print("CPU x %.2f -> makespan %.1f min" % (s, s*sim(lambda j: tasks[j][2])/60))
for t in sorted(tasks,key=lambda t:-t[1])[:8]: print("  %s %.0f s" % (t[0], t[1]))
