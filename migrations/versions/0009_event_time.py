"""event time: partition watermarks, late events per judged window, the event-time windows of an alert

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 02:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'partition_watermarks',
        sa.Column('group_id', sa.String(length=200), nullable=False),
        sa.Column('topic', sa.String(length=200), nullable=False),
        sa.Column('partition', sa.Integer(), nullable=False),
        sa.Column('event_time_ms', sa.BigInteger(), nullable=True),
        sa.Column('idle_since', sa.DateTime(timezone=True), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('group_id', 'topic', 'partition', name=op.f('pk_partition_watermarks')),
    )
    with op.batch_alter_table('window_evaluations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('late_events', sa.BigInteger(), nullable=False, server_default='0'))
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('first_window_start_ms', sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column('fired_window_start_ms', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_column('fired_window_start_ms')
        batch_op.drop_column('first_window_start_ms')
    with op.batch_alter_table('window_evaluations', schema=None) as batch_op:
        batch_op.drop_column('late_events')
    op.drop_table('partition_watermarks')
